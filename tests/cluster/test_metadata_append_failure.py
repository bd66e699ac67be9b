"""A metadata append the disk refuses takes no effect, on disk or in memory (issue 14, all or nothing): the
short write a full disk makes is cut off again, so the records appended after it load. The disk is real; the
refusal is the kernel's RLIMIT_FSIZE (EFBIG, after a short write), set in a child process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from exactly.cluster.metadata import FILE_NAME, ClusterMetadata

CHILD = """
import json, resource, sys
from pathlib import Path
from exactly.cluster.metadata import ClusterMetadata

md = ClusterMetadata(Path(sys.argv[1]))
size = md.path.stat().st_size
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 20, hard))  # room for 20 bytes of the next record
try:
    md.create_topic("refused", 3)
    error = None
except OSError as e:
    error = e.errno
refused = {"error": error, "size": md.path.stat().st_size, "before": size, "topics": sorted(md.topics)}
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
md.create_topic("after", 2)
refused["topics_after"] = sorted(md.topics)
print(json.dumps(refused))
"""


def test_a_refused_append_is_cut_off_and_later_records_load(tmp_path: Path) -> None:
    md = ClusterMetadata(tmp_path)
    md.create_topic("first", 1)
    md.close()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)], check=True, capture_output=True, timeout=60
    )
    seen = json.loads(out.stdout)
    assert seen["error"] == 27  # EFBIG: the write past the limit, after a short write of 20 bytes
    assert seen["size"] == seen["before"]  # the 20 bytes were cut off again
    assert seen["topics"] == ["first"]
    assert seen["topics_after"] == ["after", "first"]
    again = ClusterMetadata(tmp_path)  # no torn line in the middle: loads (before the fix: corrupt)
    assert sorted(again.topics) == ["after", "first"]
    assert again.topics["after"].partitions == 2
    assert all(line.endswith("}") for line in (tmp_path / FILE_NAME).read_text().splitlines())
    again.close()
