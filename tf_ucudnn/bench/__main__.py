"""``python -m tf_ucudnn.bench``: see tf_ucudnn.bench.cli."""

import sys

from tf_ucudnn.bench.cli import main

sys.exit(main())
