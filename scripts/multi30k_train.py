#!/usr/bin/env python3
"""The Multi30k recipe's training (scripts/multi30k.py): nmt-train runs, NMT_JOBS
at a time, each on its share of the cores, resumed after a stop, and grown
onto the cores its finished neighbours leave."""
import concurrent.futures
import glob
import os
import signal
import subprocess
import sys
import threading
import time

from multi30k_cache import build_commit


def die(message):
    sys.exit(f"multi30k.py: {message}")


# Set by SIGTERM or SIGINT. The trainers and translators, in the same process
# group, get the signal too: trainers save their checkpoints and exit, and the
# recipe reads their logs to the end before it stops, to tell a finished run
# from an interrupted one (and nmt-train before 2026-11-28 died of SIGPIPE
# before it saved when its log's reader had gone).
STOP = threading.Event()


def say(line):
    """Prints LINE and its newline in one write, flushed: the training and
    translation threads' lines do not run into each other."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def env_int(name, default):
    value = os.environ.get(name, "")
    if value == "":
        return default
    if not value.isdigit():
        die(f"{name} must be a whole number, got '{value}'")
    return int(value)


class Job:
    """A model that train_models() runs beside others: the thread count of its
    nmt-train and the process, so that it can grow when the others finish. A
    lock keeps grow() from signalling a process that has ended or another's."""

    def __init__(self):
        self.threads, self.proc, self.grow_to = None, None, None
        self.lock = threading.Lock()

    def started(self, proc):
        with self.lock:
            self.proc, self.grow_to = proc, None

    def ended(self):
        """Forgets the process; returns whether grow() stopped it, and if so
        takes the new thread count."""
        with self.lock:
            self.proc = None
            if self.grow_to is None:
                return False
            self.threads, self.grow_to = self.grow_to, None
            return True

    def grow(self, threads):
        """Stops the running nmt-train with SIGTERM (it saves its checkpoint and
        exits) for train_model() to resume it on THREADS threads, when they are
        more than it has. Does nothing once the process has ended."""
        with self.lock:
            if (self.proc is None or self.proc.poll() is not None or self.grow_to is not None
                    or int(threads) <= int(self.threads)):
                return
            self.grow_to = threads
            self.proc.send_signal(signal.SIGTERM)


class Training:
    """The training half of multi30k.Recipe: needs its bin, config, jobs,
    threads, extra, src and path()."""

    def threads_for(self, k):
        """The --threads of each of K processes that run at once (at most
        NMT_JOBS of them): NMT_THREADS, else the cores divided among them."""
        return str(env_int("NMT_THREADS", max(1, (os.cpu_count() or 1) // max(1, min(self.jobs, k)))))

    def train_model(self, seed, folder, target, valid, spm=(), source=None, extra=None, valid_source=None,
                    echo=True, threads=None, job=None):
        """Trains FOLDER on SOURCE (default: the training source) and TARGET,
        validating on VALID_SOURCE (default: the val source) and VALID, with the nmt-train flags EXTRA (default
        NMT_TRAIN_FLAGS), unless it holds a finished run; resumes a stopped one.
        Its log goes to FOLDER.log, and with ECHO to the terminal too (without,
        its warnings alone, after its name); THREADS
        (default: NMT_JOBS' share of the cores) are its --threads. JOB, when
        given, is the Job that train_models() grows (Job.grow()): the run then
        stops, saves and resumes on more threads. Dies if nmt-train fails."""
        extra = self.extra if extra is None else extra
        if os.path.exists(f"{folder}/trained"):
            say(f"{folder}: trained earlier, kept")
            return
        job = job or Job()
        job.threads = threads or self.threads
        t0 = time.time()
        if not echo:
            say(f"{folder}: training (log: {folder}.log)")
        while True:
            finished, grown = self.run_nmt_train(seed, folder, target, valid, spm, source, extra, valid_source,
                                                 echo, job)
            if not grown:
                break
            say(f"{folder}: resuming on {job.threads} threads (the models beside it have finished)")
        # A run that finished is `trained`, even when a signal came during its
        # last validation; an interrupted one saved, and the next start resumes it.
        if finished:
            with open(f"{folder}/trained", "w") as f:
                f.write(f"{time.time() - t0:.1f}\n")
        if not finished or STOP.is_set():
            die(f"{folder}: stopped by a signal; run the recipe again to resume it")
        if not echo:
            say(f"{folder}: trained in {time.time() - t0:.0f} s")

    def run_nmt_train(self, seed, folder, target, valid, spm, source, extra, valid_source, echo, job):
        """One nmt-train process of train_model() on JOB.threads threads: a new
        run, or the resumption of the stopped one in FOLDER. Returns (finished,
        grown): whether it logged a finish other than an interruption, and
        whether Job.grow() stopped it to go on with more threads. Dies if
        nmt-train fails otherwise."""
        # what nmt-train --resume goes on from: last.ckpt, else the newest step-N.ckpt, else best.ckpt
        resume = any(os.path.exists(f"{folder}/{name}") for name in ("last.ckpt", "best.ckpt")) or bool(
            glob.glob(f"{folder}/step-*.ckpt"))
        if not resume:
            with open(f"{folder}.commit", "w") as f:  # what the binaries were built from, not the checkout
                f.write(build_commit(f"{self.bin}/nmt-train") + "\n")
            with open(f"{folder}.flags", "w") as f:
                f.write(" ".join(extra) + "\n")
        cmd = [f"{self.bin}/nmt-train", "--config", self.config, "-o", folder, "--seed", str(seed),
               "--threads", job.threads, "--train-src", self.path(source or f"train.{self.src}"),
               "--train-tgt", self.path(target), "--valid-src", self.path(valid_source or f"val.{self.src}"),
               "--valid-tgt", self.path(valid)] + (["--resume"] if resume else list(spm)) + extra
        finished = False  # nmt-train's "training finished (REASON)" line, REASON not interrupted
        with open(f"{folder}.log", "a") as log:
            proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
            job.started(proc)
            for line in proc.stderr:  # to the terminal and the model's log
                if echo:
                    sys.stderr.write(line)
                log.write(line)
                if not echo and "] [warning] " in line:  # beside others, its warnings still reach the terminal
                    say(f"{folder}: {line.split('] [warning] ', 1)[1].rstrip()}")
                if "training finished (" in line:
                    finished = "training finished (interrupted)" not in line
            rc = proc.wait()
        grown = job.ended() and not finished and not STOP.is_set()
        if rc != 0 and not grown:
            die(f"{folder}: stopped by a signal" if STOP.is_set() else
                f"nmt-train failed for {folder} (see {folder}.log)")
        return finished, grown

    def train_models(self, specs):
        """train_model() of every (seed, folder, target, valid, spm[, source, extra, valid_source]) of SPECS, in
        order, NMT_JOBS at a time (one trained earlier is kept and takes no
        place); one that shares SentencePiece models (spm) waits until they
        are made. Fewer models to train than NMT_JOBS share
        the cores among themselves (threads_for()), and when none is left to
        start, those still training grow to their share of the cores the
        finished ones leave (Job.grow()). Dies when a model fails (after the
        others running beside it end) or waits on models that no model makes."""
        pending = []  # the models to train; the finished ones are kept without taking a place
        for spec in specs:
            if os.path.exists(f"{spec[1]}/trained"):
                say(f"{spec[1]}: trained earlier, kept")
            else:
                pending.append(spec)
        threads = self.threads_for(len(pending))
        if self.jobs == 1:
            for spec in pending:
                self.train_model(*spec, threads=threads)
            return
        running = {}  # future -> Job
        with concurrent.futures.ThreadPoolExecutor(self.jobs) as pool:
            while pending or running:
                while (pending and len(running) < self.jobs and not STOP.is_set()
                       and all(map(os.path.exists, pending[0][4][1::2]))):
                    job = Job()
                    running[pool.submit(self.train_model, *pending.pop(0), echo=False, threads=threads,
                                        job=job)] = job
                if pending and not running and STOP.is_set():
                    die("stopped by a signal; run the recipe again to resume it")
                if pending and not running:
                    die(f"{pending[0][1]}: its SentencePiece models {pending[0][4][1::2]} were not made")
                done, _ = concurrent.futures.wait(running, timeout=2, return_when="FIRST_COMPLETED")
                for future in done:
                    del running[future]
                    future.result()  # raises what the job raised
                if done and not pending and not STOP.is_set():
                    for job in running.values():
                        job.grow(self.threads_for(len(running)))
