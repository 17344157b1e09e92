"""How the GPU tests and benchmarks state each workload (workloads.py's and
extra_workloads.py's) for the compilemask tool: the example mask file and CLI parameters (workload_mask), the token order of the
strip-ordered variant (workload_order), and the descriptor bytes the tool makes of them
(compile_blob). These scripts run without the Python package, so everything here goes through
the tool; it needs numpy only (no torch), so the CPU tests check every mapping against the
workload's predicate (tests/python/test_cli_workloads.py).
"""
import os
import subprocess
import tempfile

import numpy as np
from extra_workloads import window_bounds


def compile_blob(cli, mask_file, params, nq, nk, batch=1, heads=1):
    """The descriptor bytes of `compilemask compile MASK -p k=v ... --emit descriptor`.

    params maps parameter names to CLI values: an int, a list of ints (int[]), or a string
    already in CLI form (e.g. "len:100,200" for segments, "0:128" for a segment)."""
    args = [cli, "compile", mask_file, "--nq", str(nq), "--nk", str(nk), "--batch", str(batch),
            "--heads", str(heads), "--emit", "descriptor"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, value in params.items():
            if isinstance(value, (list, tuple)):
                text = ",".join(str(int(x)) for x in value)
                if len(text) > 2000:  # long lists travel through a file (@FILE)
                    path = os.path.join(tmp, name + ".txt")
                    with open(path, "w") as f:
                        f.write(text)
                    text = "@" + path
            else:
                text = str(value)
            args += ["-p", f"{name}={text}"]
        out = os.path.join(tmp, "descriptor.bin")
        run_tool(args + ["-o", out])
        with open(out, "rb") as f:
            return f.read()


def run_tool(args):
    """Runs the tool with `args` and returns its standard output; raises RuntimeError with the
    command and its error output if it fails."""
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


# "clear_strips" is workloads.py's clear with its image tokens reordered into strips of this many
# columns (about the disk's radius; docs/language.md, strip order).
CLEAR_STRIP = 16


def strip_order(cli, start, rows, cols, strip, total):
    """`compilemask strip-order`'s permutation as an int64 numpy array (cm::strip_order: the
    tool, because these scripts run without the Python package)."""
    args = [cli, "strip-order", "--start", str(start), "--rows", str(rows), "--cols", str(cols),
            "--strip", str(strip), "--total", str(total)]
    return np.array(run_tool(args).split(), dtype=np.int64)


def workload_base(name):
    """The workload a benchmark name stands for (its maker's name)."""
    return "clear" if name == "clear_strips" else name


def workload_order(cli, name, prm):
    """None when the workload runs in its own token order, else the int64 numpy permutation
    that puts its tokens in the order of workload_mask's program (see strip_order)."""
    if name != "clear_strips":
        return None
    s = prm["grid"][0]
    return strip_order(cli, prm["text"], s, s, CLEAR_STRIP, prm["N"])


def workload_mask(name, prm):
    """The example mask file and CLI parameters equal to a workload's params, workloads.py's or
    extra_workloads.py's (for clear_strips: on the tokens reordered by workload_order)."""
    N = prm["N"]
    if name == "causal":
        return "causal.mask", {}
    if name == "sliding":
        return "sliding_window.mask", {"W": prm["W"]}
    if name == "doc_causal":
        return "doc_causal.mask", {"docs": "len:" + ",".join(map(str, prm["lens"]))}
    if name == "shared_prefix":
        bounds = [prm["prompt"]]
        for r in prm["responses"]:
            bounds.append(bounds[-1] + r)
        assert bounds[-1] == N
        return "shared_prefix.mask", {"prompt": f"0:{prm['prompt']}",
                                      "responses": ",".join(map(str, bounds))}
    if name == "hstu":
        return "hstu.mask", {"seqs": "len:" + ",".join(map(str, prm["lens"])),
                             "ctx": list(prm["ctx"]), "targets": list(prm["targets"])}
    if name in ("clear", "clear_strips"):
        s = prm["grid"][0]
        strip = CLEAR_STRIP if name == "clear_strips" else s
        return "clear.mask", {"text": prm["text"], "s": s, "r": prm["r"], "strip": strip}
    if name == "natten":
        s, r = prm["side"], prm["r"]
        return "neighbourhood_2d.mask", {"rows": s, "cols": s, "ry": r, "rx": r, "shape": 0,
                                         "strip": s}
    if name == "video":
        s, r = prm["side"], prm["r"]
        return "video_neighbourhood.mask", {"frames": prm["frames"], "rows": s, "cols": s,
                                            "rt": prm["rt"], "ry": r, "rx": r, "strip": s}
    if name == "random_window":
        starts, ends = window_bounds(prm)
        return "row_intervals.mask", {"starts": starts.tolist(), "ends": ends.tolist()}
    raise KeyError(name)
