#!/usr/bin/env python3
"""Drop-in for catstack's engine/hooks/llm-judge/judge.py (SPEC section 12).

Hooks keep importing this file and calling enqueue(), drain() and the helpers; the
judging moves to the llm-judge daemon. No model ever runs in the hook's process:
enqueue() publishes the job file and returns. When no daemon holds the state folder's
lock it starts `llm-judge run <job>` detached, which claims the job, so a daemon started
later does not judge it again. Python 3.9+, standard library only.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

TIMEOUT_SECONDS = 60
REASON_LIMIT = 300
PROMPT_FIELD_CAP = 4000
# The name catstack's older callers import.
PROMPT_FIELD_CHAR_CAP = PROMPT_FIELD_CAP
PROMPT_SLOT = "{prompt}"
CHILD_ENV = "CATSTACK_LLM_JUDGE_CHILD"
RUNNERS_ENV = "CATSTACK_LLM_JUDGE_RUNNERS"
STATE_ENV = "CATSTACK_LLM_JUDGE_STATE_DIR"
BIN_ENV = "LLM_JUDGE_BIN"
SUBAGENT_KEYS = ("agent_id", "isSidechain", "is_sidechain")
SUBAGENT_TRANSCRIPT_KEYS = ("agent_transcript_path", "transcript_path", "transcriptPath")

# Detached `llm-judge run` children, polled (never waited on) so they do not linger
# as zombies in a long-lived caller.
_spawned: list = []
_said_no_daemon = False
_events = None


def state_root() -> str:
    """The state folder: $CATSTACK_LLM_JUDGE_STATE_DIR if non-empty, else ~/.cache/catstack-llm-judge."""
    return os.environ.get(STATE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "catstack-llm-judge")


def _escape(text: str) -> str:
    # One event per line (SPEC 7): control characters are escaped.
    return "".join(ch if ch >= " " and ch != "\x7f" else json.dumps(ch)[1:-1] for ch in text)


def log(message: str) -> None:
    """Appends one whole line to <state>/judge.log (UTC timestamp, control characters escaped)."""
    root = state_root()
    os.makedirs(root, mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = f"{stamp}  INFO judge.py: {_escape(str(message))}\n".encode("utf-8", "replace")
    fd = os.open(os.path.join(root, "judge.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json_atomic(path: str, data: dict) -> None:
    """Publishes JSON at path: hidden temp file in the same folder, fsync, rename, folder fsync."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    _fsync_dir(folder)


def verdict_dir(transcript: str) -> str:
    """<state>/verdicts/<first 16 hex of sha1(transcript)>."""
    digest = hashlib.sha1(transcript.encode("utf-8")).hexdigest()[:16]
    return os.path.join(state_root(), "verdicts", digest)


def _clip(label: str, detail: str) -> str:
    detail = (detail or "").strip()
    room = REASON_LIMIT - len(label) - 2
    if not detail or room <= 0:
        return label[:REASON_LIMIT]
    return f"{label}: {detail[-room:]}"


def _clip_field(text: object) -> str:
    return str(text or "").strip()[-PROMPT_FIELD_CAP:]


def build_prompt(rule_text: str, assistant_reply: str, human_message: str) -> str:
    """The standard one-line-of-JSON question about the last turn, each field capped."""
    return "\n".join(
        [
            'Return exactly one line of JSON: {"match": true|false, "closest": "<phrase or empty>"}',
            "Rule:",
            _clip_field(rule_text),
            "Last assistant reply:",
            _clip_field(assistant_reply),
            "Last human message:",
            _clip_field(human_message),
        ]
    )


def is_subagent_transcript(transcript: object) -> bool:
    """A path with a part exactly `subagents`, or a file whose first line is a sidechain record."""
    if not isinstance(transcript, str) or not transcript:
        return False
    if "subagents" in transcript.replace("\\", "/").split("/"):
        return True
    try:
        # Only a regular file: a FIFO named as transcript must not block the hook.
        if not os.path.isfile(transcript):
            return False
        with open(transcript, encoding="utf-8", errors="ignore") as handle:
            row = json.loads(handle.readline(1 << 20))
    except (OSError, ValueError):
        return False
    return isinstance(row, dict) and (row.get("isSidechain") is True or bool(row.get("agent_id")))


def subagent_flags(payload: object) -> dict:
    """The subagent markers (truthy agent_id / isSidechain / is_sidechain) a payload carries; {} for none."""
    if not isinstance(payload, dict):
        return {}
    return {key: payload[key] for key in SUBAGENT_KEYS if payload.get(key)}


def is_subagent_job(job: dict) -> bool:
    """SPEC 12's rule: a subagent marker key, or a subagent transcript."""
    if subagent_flags(job):
        return True
    return is_subagent_transcript(job.get("transcript"))


def is_subagent_payload(payload: object) -> bool:
    """A hook payload from a helper agent: a marker key, or any transcript it names is a subagent's."""
    if not isinstance(payload, dict):
        return False
    if subagent_flags(payload):
        return True
    return any(is_subagent_transcript(payload.get(key)) for key in SUBAGENT_TRANSCRIPT_KEYS)


def _binary_places() -> list:
    home = os.path.expanduser("~")
    return [os.path.join(home, ".cargo", "bin", "llm-judge"), os.path.join(home, ".local", "bin", "llm-judge")]


def find_binary() -> str:
    """llm-judge via $LLM_JUDGE_BIN, then PATH, then ~/.cargo/bin and ~/.local/bin."""
    named = os.environ.get(BIN_ENV)
    if named:
        if os.path.isfile(named) and os.access(named, os.X_OK):
            return named
        raise FileNotFoundError(f"{BIN_ENV}={named!r} is not an executable file; fix it or unset it")
    found = shutil.which("llm-judge")
    if found:
        return found
    for place in _binary_places():
        if os.path.isfile(place) and os.access(place, os.X_OK):
            return place
    raise FileNotFoundError(
        "llm-judge not found: looked in $" + BIN_ENV + ", PATH, " + " and ".join(_binary_places())
        + "; install it (cargo install --path .) or set " + BIN_ENV
    )


def daemon_running(root: str | None = None) -> bool:
    """True when a daemon holds <state>/daemon.lock (a shared probe of its flock)."""
    path = os.path.join(root or state_root(), "daemon.lock")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)
    return False


def _load_events():
    """catstack's _sdk/events.py when this file sits in catstack's tree; else None."""
    global _events
    if _events is None:
        _events = False
        sdk = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_sdk")
        if os.path.isfile(os.path.join(sdk, "events.py")):
            try:
                if sdk not in sys.path:
                    sys.path.insert(0, sdk)
                import events  # noqa: PLC0415
                from finding import Finding  # noqa: PLC0415

                _events = (events, Finding)
            except Exception:
                _events = False
    return _events or None


def _job_hook(job: dict) -> str:
    hook = job.get("hook")
    return hook if isinstance(hook, str) and hook else "llm-judge"


def _job_harness(job: dict) -> str:
    harness = job.get("harness")
    return harness if isinstance(harness, str) and harness else "judge"


def _record_queued(job: dict) -> None:
    transcript = str(job.get("transcript") or "")
    if not transcript:
        print(
            f"catstack-hook-error {_job_hook(job)}: judge job {job['id']} was queued with no transcript "
            "path, so its verdict can never be delivered",
            file=sys.stderr,
        )
    loaded = _load_events()
    if loaded is None:
        return
    try:
        loaded[0].write_stage_event(
            _job_hook(job), _job_harness(job), transcript, "judge_queued",
            "transcript" if transcript else "no_transcript", job["id"], stderr=io.StringIO(),
        )
    except Exception:
        pass


def _record_drained(verdict: dict, transcript: str) -> None:
    loaded = _load_events()
    if loaded is None:
        return
    events, finding = loaded
    hook = verdict.get("hook") if isinstance(verdict.get("hook"), str) and verdict.get("hook") else "llm-judge"
    rule_id = verdict.get("rule_id") if isinstance(verdict.get("rule_id"), str) and verdict.get("rule_id") else hook
    finding_id = verdict.get("id") if isinstance(verdict.get("id"), str) and verdict.get("id") else "unknown"
    outcome = verdict.get("outcome")
    reason = verdict.get("reason")
    try:
        events.write_events(
            hook, "judge", {"session_id": transcript},
            [finding(rule_id, transcript, reason if isinstance(reason, str) else "", "")],
            "", "judge", 0, stderr=io.StringIO(),
            action=outcome if outcome in ("hit", "clean", "unchecked") else "unchecked",
            finding_id=finding_id,
        )
    except Exception:
        pass


def _reap() -> None:
    _spawned[:] = [proc for proc in _spawned if proc.poll() is None]


def _start_run(job_path: str) -> None:
    global _said_no_daemon
    try:
        binary = find_binary()
    except FileNotFoundError as exc:
        print(f"catstack-hook-error llm-judge: {exc}; the job stays queued for a daemon", file=sys.stderr)
        return
    if not _said_no_daemon:
        _said_no_daemon = True
        print(
            f"llm-judge: no daemon holds the lock of {state_root()}; judging jobs with a background "
            "`llm-judge run` (start the daemon: llm-judge service install)",
            file=sys.stderr,
        )
    try:
        env = dict(os.environ)
        env.pop(CHILD_ENV, None)
        proc = subprocess.Popen(
            [binary, "run", job_path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            env=env,
        )
    except OSError as exc:
        print(f"catstack-hook-error llm-judge: cannot start {binary} run: {exc}; the job stays queued", file=sys.stderr)
        return
    _spawned.append(proc)


def enqueue(job: dict) -> str | None:
    """Publishes jobs/<id>.json and returns the id; None inside a runner or for a subagent job."""
    if CHILD_ENV in os.environ:
        return None
    if is_subagent_job(job):
        return None
    job = dict(job)
    job_id = str(job.get("id") or uuid.uuid4().hex)
    if os.path.basename(job_id) != job_id or job_id.startswith(".") or "\0" in job_id or job_id in ("", ".."):
        raise ValueError(f"job id {job_id!r} is not a plain file name")
    job["id"] = job_id
    root = state_root()
    job_path = os.path.join(root, "jobs", f"{job_id}.json")
    write_json_atomic(job_path, job)
    _reap()
    if not daemon_running(root):
        _start_run(job_path)
    _record_queued(job)
    return job_id


def _recover_dead_claims(folder: str) -> None:
    # A drain that died after claiming leaves `.<name>.<pid>.drain`: put it back.
    for name in os.listdir(folder):
        if not (name.startswith(".") and name.endswith(".drain")):
            continue
        stem, _, pid = name[1:-len(".drain")].rpartition(".")
        if not stem.endswith(".json") or not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue
        except ProcessLookupError:
            pass
        except OSError:
            continue
        try:
            os.rename(os.path.join(folder, name), os.path.join(folder, stem))
        except OSError:
            pass


def drain(transcript: str) -> list[dict]:
    """The transcript's verdicts, oldest first, each claimed by rename and removed once read."""
    folder = verdict_dir(transcript)
    if os.path.islink(folder):
        log(f"drain: {folder} is a symlink; refused (the judge never follows links in its state folder)")
        return []
    if not os.path.isdir(folder):
        return []
    _recover_dead_claims(folder)
    claimed = []
    for name in os.listdir(folder):
        if name.startswith(".") or not name.endswith(".json"):
            continue
        taken = os.path.join(folder, f".{name}.{os.getpid()}.drain")
        try:
            os.rename(os.path.join(folder, name), taken)
        except FileNotFoundError:
            continue  # another drain took it
        try:
            stamp = os.lstat(taken).st_mtime_ns
        except OSError:
            stamp = 0
        claimed.append((stamp, name, taken))
    verdicts = []
    for _, name, taken in sorted(claimed):
        try:
            fd = os.open(taken, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, encoding="utf-8") as handle:
                loaded = json.load(handle)
            if not isinstance(loaded, dict):
                raise ValueError(f"verdict file holds a JSON {type(loaded).__name__}, not an object")
        except (OSError, ValueError) as exc:
            log(f"drain: unreadable verdict {name} for {transcript}: {exc}")
            loaded = {
                "id": name[: -len(".json")],
                "transcript": transcript,
                "outcome": "unchecked",
                "reason": _clip("unreadable verdict file", str(exc)),
            }
        verdicts.append(loaded)
        _record_drained(loaded, transcript)
        try:
            os.remove(taken)
        except OSError as exc:
            log(f"drain: could not remove claimed verdict {taken}: {exc}")
    return verdicts


def _unchecked(reason: str) -> dict:
    return {"outcome": "unchecked", "runner": None, "answer": None,
            "attempts": [{"runner": "llm-judge", "ok": False, "reason": _clip("judge error", reason)}]}


def ask(prompt: str, mode: object = None, timeout_seconds: object = None, cwd: object = None) -> dict:
    """Runs `llm-judge ask` (prompt on stdin): {"outcome": "answered"|"unchecked", "runner", "answer", "attempts"}."""
    argv = [find_binary(), "ask", "--prompt-file", "-"]
    if mode == "investigate":
        argv += ["--mode", "investigate"]
    if isinstance(timeout_seconds, (int, float)) and not isinstance(timeout_seconds, bool):
        argv += ["--timeout", str(timeout_seconds)]
    if isinstance(cwd, str) and cwd:
        argv += ["--cwd", cwd]
    proc = subprocess.run(argv, input=str(prompt), capture_output=True, text=True, check=False)
    if proc.returncode == 2:
        # A usage or config error (a bad runners variable, as catstack's ask raised).
        raise ValueError(proc.stderr.strip() or f"llm-judge ask exited 2: {argv}")
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return _unchecked(f"llm-judge ask exited {proc.returncode}: {proc.stderr.strip()}")
    if not isinstance(result, dict):
        return _unchecked(f"llm-judge ask printed {proc.stdout.strip()[:100]!r}")
    return result


def run_job(path: str) -> dict:
    """Judges one job file now with `llm-judge run` and returns its verdict (left for drain)."""
    stem = os.path.splitext(os.path.basename(path))[0]
    transcript = ""
    try:
        with open(path, encoding="utf-8") as handle:
            loaded = json.load(handle)
        if isinstance(loaded, dict) and isinstance(loaded.get("transcript"), str):
            transcript = loaded["transcript"]
    except (OSError, ValueError):
        pass
    subprocess.run([find_binary(), "run", path], stdin=subprocess.DEVNULL, check=False)
    try:
        with open(os.path.join(verdict_dir(transcript), f"{stem}.json"), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        return {"id": stem, "transcript": transcript, "outcome": "unchecked",
                "reason": _clip("judge error: no verdict after llm-judge run", str(exc))}


def main(argv: list) -> int:
    """`judge.py run JOB` runs `llm-judge run JOB`."""
    if len(argv) == 2 and argv[0] == "run":
        try:
            binary = find_binary()
        except FileNotFoundError as exc:
            print(f"catstack-hook-error llm-judge: {exc}", file=sys.stderr)
            return 1
        return subprocess.run([binary, "run", argv[1]], check=False).returncode
    print("usage: judge.py run <job path>", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
