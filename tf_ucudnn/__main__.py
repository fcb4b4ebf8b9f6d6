"""``python -m tf_ucudnn``: see tf_ucudnn.cli."""

import sys

from tf_ucudnn.cli import main

sys.exit(main())
