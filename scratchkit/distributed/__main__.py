"""`torchrun --nproc-per-node N -m scratchkit.distributed bench|verify|train ...`: one rank of a job."""
import sys

from scratchkit.commands.rank import main

sys.exit(main())
