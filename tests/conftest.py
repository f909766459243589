import sys
from pathlib import Path

# Test helpers (configbytes, fakesysfs) import as top-level modules.
sys.path.insert(0, str(Path(__file__).parent))
