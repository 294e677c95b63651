"""Print an address inside the first FDE of FILE that has several rows (for `make demo`)."""

import sys

from fastunwind.cfi import UnwindInfo

info = UnwindInfo.open(sys.argv[1], strict=False)
for section in info.sections:
    for fde in section.fdes():
        if fde.row_count >= 4:
            rows = section.rows(fde)
            print(hex(rows[2].start))
            sys.exit(0)
sys.exit("no FDE with several rows")
