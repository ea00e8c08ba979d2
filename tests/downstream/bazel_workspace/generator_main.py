import sys

from generator.__main__ import main

sys.exit(main())
