import sys

from radixbench.harness.cli import main

sys.exit(main())
