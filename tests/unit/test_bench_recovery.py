#!/usr/bin/env python3
"""bench/recovery on a recorded job: the demo's job 1 (contrib/demo, 1000
steps), whose second attempt held an in-job relaunch before the job was
requeued. Every figure of the table is checked against the stamps the
job, the launcher, the trainer, sigmad and the demo wrote, read here
straight from the recorded files (tests/unit/data/recovery/: the job
output less its per-step checkpoint lines, sigmad's events of the job, the
metrics CSV less the columns bench/recovery does not read, the demo's
fault marks)."""
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("top_srcdir") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = os.path.join(SRC, "tests", "unit", "data", "recovery")
TOOL = os.path.join(SRC, "bench", "recovery")
OUT = os.path.join(DATA, "job.out")
EVENTS = os.path.join(DATA, "events.jsonl")
METRICS = os.path.join(DATA, "metrics.csv")
MARKS = os.path.join(DATA, "marks")


def read(path):
    with open(path) as f:
        return f.read()


def run(*extra, metrics=METRICS):
    args = [sys.executable, TOOL, "--job-out", OUT, "--events", EVENTS,
            "--job", "1", "--marks", MARKS, "--ranks", "4"]
    if metrics:
        args += ["--metrics", metrics]
    return subprocess.run(args + list(extra), capture_output=True,
                          text=True, check=True)


def stamp(pattern, after=None):
    """The first stamp of a job output line matching pattern (group 1),
    after the line matching after when given."""
    seen = after is None
    with open(OUT) as f:
        for line in f:
            if not seen:
                seen = re.search(after, line) is not None
                continue
            m = re.search(pattern, line)
            if m:
                return float(m.group(1))
    raise AssertionError("no line %r in the recorded job output" % pattern)


def number(pattern, after=None):
    return int(stamp(pattern, after))


def event(type_, attempt):
    with open(EVENTS) as f:
        for line in f:
            e = json.loads(line)
            if e["type"] == type_ and e.get("attempt") == attempt:
                return e
    raise AssertionError("no %s event of attempt %d" % (type_, attempt))


def mark(node):
    with open(MARKS) as f:
        for line in f:
            t, _, n = line.split()
            if n == node:
                return float(t)
    raise AssertionError("no mark on " + node)


def first_row(after):
    with open(METRICS) as f:
        return min(float(r["epoch_s"]) for r in csv.DictReader(f)
                   if float(r["epoch_s"]) >= after)


class RecordedDemo(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rec = json.loads(run("--json").stdout)["recoveries"]

    def figures(self, r, fault, decided, acted, started, first, reached,
                resumed):
        self.assertAlmostEqual(r["fault"], fault, places=6)
        self.assertAlmostEqual(r["detection"], decided - fault, places=6)
        self.assertAlmostEqual(r["requeue"], acted - decided, places=6)
        if started is None:
            self.assertIsNone(r["start"])
            self.assertAlmostEqual(r["restore"], first - acted, places=6)
        else:
            self.assertAlmostEqual(r["start"], started - acted, places=6)
            self.assertAlmostEqual(r["restore"], first - started, places=6)
        self.assertAlmostEqual(r["total"], first - fault, places=6)
        self.assertEqual(r["reached"], reached)
        self.assertEqual(r["resumed"], resumed)
        self.assertEqual(r["lost"], max(0, reached - resumed))

    def test_rows(self):
        self.assertEqual([(r["kind"], r["node"], r["spare"])
                          for r in self.rec],
                         [("warning", "n3", "n6"), ("in-job", "n2", "n6"),
                          ("failure", "n1,n2", "n7,n8")])

    def test_warning_move(self):
        # sigmad decided and requeued; attempt 1 started and trained
        start1 = stamp(r"^attempt 1 start ([\d.]+)")
        self.figures(self.rec[0], mark("n3"), event("decide", 2)["time"],
                     event("requeue", 2)["time"], start1, first_row(start1),
                     number(r"^stopped by .* at step (\d+) after a"),
                     number(r"continuing at step (\d+)",
                            after=r"^attempt 1 start"))
        self.assertEqual(self.rec[0]["lost"], 0)

    def test_in_job_relaunch(self):
        # the launcher saw the step end, judged the nodes, launched again:
        # no requeue, no new attempt, elapsed_s started again from 0
        exit1 = stamp(r"^sigma-launch: step exit 76 at ([\d.]+)",
                      after=r"^sigma-launch: launch 1 at")
        launch2 = stamp(r"^sigma-launch: launch 2 at ([\d.]+)")
        reached = max(int(m.group(1)) for m in re.finditer(
            r"(?m)^step (\d+)/", read(OUT).split(
                "sigma-launch: launch 2 at")[0]))
        self.figures(self.rec[1], mark("n2"), exit1, launch2, None,
                     first_row(launch2), reached,
                     number(r"continuing at step (\d+)",
                            after=r"^sigma-launch: launch 2 at"))

    def test_requeue_after_the_fallback(self):
        start2 = stamp(r"^attempt 2 start ([\d.]+)")
        reached = max(int(m.group(1)) for m in re.finditer(
            r"(?m)^step (\d+)/", read(OUT).split(
                "attempt 2 start")[0]))
        self.figures(self.rec[2], mark("n1"), event("decide", 3)["time"],
                     event("requeue", 3)["time"], start2, first_row(start2),
                     reached,
                     number(r"continuing at step (\d+)",
                            after=r"^attempt 2 start"))

    def test_within_a_second_of_the_stamps(self):
        # every part is non-negative, and they add up to the total
        for r in self.rec:
            parts = [r[k] for k in ("detection", "requeue", "start",
                                    "restore") if r[k] is not None]
            self.assertTrue(all(p >= 0 for p in parts), r)
            self.assertAlmostEqual(sum(parts), r["total"], places=6)
            self.assertLess(r["total"], 60, r)

    def test_text_table(self):
        text = run().stdout
        self.assertIn("3 attempt(s), 4 launch(es)", text)
        rows = [l.split() for l in text.splitlines()
                if re.match(r"  attempt \d+ ", l) and "on " not in l]
        self.assertEqual([r[2] if r[2] != "launch" else r[4]
                          for r in rows], ["warning", "in-job", "failure"])

    def test_series_breaks_at_every_launch(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "series.dat")
            run("--series", path)
            text = read(path)
        blocks = [b for b in text.split("\n\n")
                  if b.strip() and not b.startswith("#")]
        self.assertEqual(text.count("\n\n"), 4)  # one break per launch
        walls = [float(l.split()[0]) for l in text.splitlines()
                 if l and not l.startswith("#")]
        self.assertEqual(walls, sorted(walls))
        self.assertGreater(len(blocks), 0)

    def test_no_stamps(self):
        # metrics written before epoch_s: said, and the times unknown
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "old.csv")
            with open(path, "w") as f:
                f.write("step,loss,elapsed_s\n1,5.5,0.3\n")
            p = run("--json", metrics=path)
        self.assertIn("no row with an epoch_s stamp", p.stderr)
        rec = json.loads(p.stdout)["recoveries"]
        self.assertEqual(len(rec), 3)
        self.assertTrue(all(r["total"] is None for r in rec))


if __name__ == "__main__":
    unittest.main()
