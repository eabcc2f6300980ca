"""The child process of ``sandbox.CheckChild``: ``python -m course.check_child FD LESSON_DIR
PATH INDICES`` loads the lesson's checks and the learner's file ``PATH`` and runs the checks
``INDICES`` (of ``CHECKS``, comma-separated), writing one JSON message a line to the pipe
``FD``: ``{"ready": true}`` (checks loaded), ``{"loaded": true}`` (the learner's file
imported, or not), then ``{"index": i, "result": {...}}`` per check and ``{"done": true}``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from course.checks import failure, load_checks, load_target, run_check
from course.sandbox import pack
from simdist.base.processes import die_with_parent


def main(argv: list[str]) -> int:
    fd, lesson_dir, path, indices = argv
    path = Path(path)
    die_with_parent()
    if os.environ.get("DISTLAB_CHECKER_PID") not in (None, str(os.getppid())):
        return 1  # the checker is gone already
    channel = os.fdopen(int(fd), "w", encoding="utf-8")

    def send(**message) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        channel.write(json.dumps(pack(message)) + "\n")
        channel.flush()

    checks = load_checks(lesson_dir)
    send(ready=True)
    module, failed = load_target(path)
    send(loaded=True)
    for index in (int(i) for i in indices.split(",") if i):
        check = checks[index]
        result = failure(check, *failed) if failed else run_check(check, module, path)
        send(index=index, result=vars(result))
    send(done=True)
    os._exit(0)  # threads the learner's code left running do not keep the child alive


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
