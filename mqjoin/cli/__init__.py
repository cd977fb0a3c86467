"""The ``mqjoin`` command line.

Errors are one line on stderr, no tracebacks; the exit code says whose fault it is:
``2`` bad input (any :class:`~mqjoin.model.errors.MqjoinError`: workload, option, data …),
``3`` an internal error of mqjoin (:class:`~mqjoin.model.errors.InternalError`, e.g. ``run --check``
finding results that differ from the brute-force oracle: please report it),
``4`` a deployment that started and then failed (:class:`RunFailedError`: a Spark job failed —
not the input's fault).

>>> main(["optimize", "paper_v2.yaml", "--time-limit", "0"])
2

Commands: ``optimize``, ``run``, ``candidates``, ``compare``, ``frontier``, ``partitions``, ``synth``, ``demo``.
The package: :mod:`~mqjoin.cli.parser` (the parser and its argument groups),
:mod:`~mqjoin.cli.options` (the options turned into values: the optimiser's call, PMJoin's options, …),
:mod:`~mqjoin.cli.plans` (the commands that plan), :mod:`~mqjoin.cli.runs` (those that run),
:mod:`~mqjoin.cli.spark`, :mod:`~mqjoin.cli.adaptive` and :mod:`~mqjoin.cli.budget` (a run on Spark,
an adaptive run, a CPU budget).
"""

from __future__ import annotations

import sys
from typing import Sequence

from mqjoin.cli.parser import build_parser
from mqjoin.model.errors import InternalError, MqjoinError, RunFailedError
from mqjoin.planning.options import check_options

#: exit code of bad input (workload, options, data): the user can fix it
EXIT_BAD_INPUT = 2
#: exit code of an internal error (a bug of mqjoin, e.g. results that differ from the oracle)
EXIT_INTERNAL = 3
#: exit code of an engine failure (a deployment started, then failed): not the input's fault
EXIT_ENGINE = 4


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if hasattr(args, "time_limit"):  # the optimiser's options, checked before any data is read
            check_options(getattr(args, "mode", "mqo"), getattr(args, "partitioning", "single"),
                          args.solver, args.time_limit, getattr(args, "mir_budget", None))
        return args.func(args)
    except InternalError as e:
        print(f"mqjoin: internal error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_INTERNAL
    except RunFailedError as e:
        print(f"mqjoin: engine error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_ENGINE
    except MqjoinError as e:
        print(f"mqjoin: error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("mqjoin: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
