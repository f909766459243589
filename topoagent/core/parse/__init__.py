"""Parsers: other tools' text and sysfs values into values (pure; bad input raises the module's parse error)."""
