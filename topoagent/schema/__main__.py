"""``python -m topoagent.schema``: write the generated JSON Schemas (see :mod:`topoagent.schema`)."""

from topoagent.schema import write

for path in write():
    print(path)
