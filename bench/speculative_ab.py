#!/usr/bin/env python3
"""Side-by-side decode speed of pocket binaries and drafter flags on the same prompts.

Each configuration is "BINARY|FLAGS" (FLAGS may be empty: plain decoding). For every
round and prompt file, the configurations run one after another (the machine is
shared: alternating keeps them under the same load). Greedy, -n tokens (128),
--ignore-eos, 2 threads (-t). Prints per configuration:
  - the median generated tok/s (decode wall time, as `pocket run` reports it);
  - the median CPU time (user + sys of the whole process, from wait4) per generated
    token: far less sensitive than wall time to other jobs on a loaded machine;
  - with two or more configurations, the median over (round, prompt) pairs of the
    ratio to the first configuration: tok/s ratio, request-time ratio (the prompt's
    wall time, a drafter's catch-up on it included, plus the decode's) and CPU-time
    ratio (first / this for both times, so > 1 means faster than the first);
  - the drafted / accepted totals when the run is speculative.

  python3 bench/speculative_ab.py -m models/pocket-mini.pq4 --prompts p0.txt,p1.txt --rounds 4 \\
      "old/pocket|" "build/release/pocket|" "build/release/pocket|--draft lookup"
"""
import argparse, os, re, shlex, statistics, subprocess, tempfile


def run_once(cmd):
    """Runs cmd; returns (stderr text, user + sys CPU seconds of the process)."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{text}")
    return text, usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--prompts", required=True, help="comma-separated prompt files")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("configs", nargs="+", help='"BINARY|FLAGS"')
    a = ap.parse_args()
    tps = {c: [] for c in a.configs}
    cpu = {c: [] for c in a.configs}  # CPU seconds per generated token
    req = {c: [] for c in a.configs}  # wall seconds of the request: prompt (with a drafter's catch-up) + decode
    drafted = {c: [0, 0] for c in a.configs}
    for r in range(a.rounds):
        for pf in a.prompts.split(","):
            # Alternate the order each round so no configuration always runs first.
            order = a.configs if r % 2 == 0 else list(reversed(a.configs))
            for c in order:
                binary, flags = c.split("|", 1)
                cmd = [binary, "run", "-m", a.model, "-t", str(a.threads), "--temp", "0", "-n", str(a.n), "--ignore-eos", "-f", pf]
                text, seconds = run_once(cmd + shlex.split(flags))
                m = re.search(r"generated (\d+) tokens ([\d.]+) tok/s", text)
                tps[c].append(float(m.group(2)))
                cpu[c].append(seconds / int(m.group(1)))
                p = re.search(r"prompt (\d+) tokens .*? ([\d.]+) tok/s", text)
                req[c].append(int(p.group(1)) / float(p.group(2)) + int(m.group(1)) / float(m.group(2)))
                d = re.search(r"drafted (\d+), accepted (\d+)", text)
                if d:
                    drafted[c][0] += int(d.group(1))
                    drafted[c][1] += int(d.group(2))
    base = a.configs[0]
    print("| configuration | tok/s (median) | CPU ms/token (median) | tok/s ratio | request-time ratio | CPU-time ratio | drafted / accepted | runs |")
    print("|---|---|---|---|---|---|---|---|")
    for c in a.configs:
        wall_ratio = statistics.median(x / y for x, y in zip(tps[c], tps[base]))
        cpu_ratio = statistics.median(y / x for x, y in zip(cpu[c], cpu[base]))
        req_ratio = statistics.median(y / x for x, y in zip(req[c], req[base]))
        print(f"| `{c}` | {statistics.median(tps[c]):.1f} | {1e3 * statistics.median(cpu[c]):.3f} | "
              f"{wall_ratio:.3f}x | {req_ratio:.3f}x | {cpu_ratio:.3f}x | {drafted[c][0]} / {drafted[c][1]} | {len(tps[c])} |")


if __name__ == "__main__":
    main()
