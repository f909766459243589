"""The version of topoagent: the one place it is written (``pyproject.toml`` reads it from here).

A release is a tagged commit whose version is listed in ``CHANGELOG.md``; see its header for
what a change to each part of the number means.  This module imports nothing, so outputs and
sources can name the version without importing the package's lazy public API.
"""

__version__ = "0.1.0"
