"""Every test run writes its records to a store of its own, never to the user's results store."""

import os
import tempfile

os.environ.setdefault("FABRICLAB_STORE", os.path.join(tempfile.mkdtemp(prefix="fabriclab-test-store-"),
                                                      "results.db"))
