"""A FAKE GPU payload for tests on machines without a GPU (a mock of what cannot exist here).

It speaks the real payload's command line and result format, but instead of running kernels it
acts out a scenario given as JSON in FAKE_GPU_SCENARIO: which devices exist, and per step and
mode (native = CUDA_DISABLE_PTX_JIT=1, jit = without it) what happens:

    "ok" | "wrong" | "skip:REASON" | "error:TEXT" | "hang" | "segv" | "exit:CODE:STDERR"

The hangs and crashes are real: the process really sleeps or really dies from SIGSEGV.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    scenario = json.loads(os.environ["FAKE_GPU_SCENARIO"])
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    probe = sub.add_parser("probe")
    probe.add_argument("--result", required=True)
    kernel = sub.add_parser("kernel")
    kernel.add_argument("step")
    kernel.add_argument("--device", required=True)
    kernel.add_argument("--result", required=True)
    kernel.add_argument("--snippet")
    args = parser.parse_args()
    out = Path(args.result)
    if args.command == "probe":
        behaviour = scenario.get("probe", "ok")
        _maybe_die(behaviour)
        out.write_text(
            json.dumps(
                {
                    "payload_version": 1,
                    "python": "3.11.7",
                    "torch_version": "2.14.1+cu130",
                    "torch_cuda": "13.0",
                    "cudnn_version": "9.24.0",
                    "nccl_version": "2.30.7",
                    "driver_version": scenario.get("driver", "580.159.03"),
                    "arch_list": scenario.get("arch_list", []),
                    "cuda_available": bool(scenario.get("devices")),
                    "devices": scenario.get("devices", []),
                    **({"cuda_error": scenario["cuda_error"]} if "cuda_error" in scenario else {}),
                    **(
                        {"torch_import_error": scenario["torch_import_error"]}
                        if "torch_import_error" in scenario
                        else {}
                    ),
                }
            )
        )
        return 0
    mode = "native" if os.environ.get("CUDA_DISABLE_PTX_JIT") == "1" else "jit"
    # Record every attempt so tests can check which modes ran with which environment.
    log = os.environ.get("FAKE_GPU_LOG")
    if log:
        with Path(log).open("a") as fh:
            fh.write(
                json.dumps(
                    {
                        "step": args.step,
                        "device": args.device,
                        "mode": mode,
                        "CUDA_DISABLE_PTX_JIT": os.environ.get("CUDA_DISABLE_PTX_JIT"),
                        "CUDA_FORCE_PTX_JIT": os.environ.get("CUDA_FORCE_PTX_JIT"),
                        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
                        "snippet": args.snippet,
                        "pid": os.getpid(),
                    }
                )
                + "\n"
            )
    plan = scenario.get("steps", {}).get(args.step, {})
    behaviour = plan.get(f"{args.device}:{mode}", plan.get(mode, "ok"))
    _maybe_die(behaviour)
    result: dict[str, object] = {
        "payload_version": 1,
        "step": args.step,
        "device": args.device,
        "ok": False,
        "error": None,
        "skipped": None,
        "tolerance": 1e-4,
        "max_rel_error": None,
    }
    if behaviour == "ok":
        result.update(ok=True, max_rel_error=3e-7)
    elif behaviour == "wrong":
        result.update(max_rel_error=0.5, mismatch="max relative error 0.5 exceeds the tolerance")
    elif behaviour.startswith("skip:"):
        result.update(skipped=behaviour[5:])
    elif behaviour.startswith("error:"):
        result.update(error=behaviour[6:])
    out.write_text(json.dumps(result))
    return 0


def _maybe_die(behaviour: str) -> None:
    if behaviour == "hang":
        time.sleep(3600)
    if behaviour == "segv":
        print("fake driver: about to fault", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    if behaviour.startswith("exit:"):
        _, code, text = behaviour.split(":", 2)
        print(text, file=sys.stderr, flush=True)
        sys.exit(int(code))


if __name__ == "__main__":
    sys.exit(main())
