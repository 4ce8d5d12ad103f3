#!/usr/bin/env python3
"""Drop-in for catstack's engine/hooks/llm-judge/judge.py (docs/reference.md, "The catstack drop-in").

Hooks keep importing this file and calling enqueue(), drain() and the helpers; the
judging moves to the llm-judge daemon. No model ever runs in the hook's process:
enqueue() publishes the job file and returns. When no daemon holds the state folder's
lock it starts `llm-judge run <job>` detached, which claims the job, so a daemon started
later does not judge it again. Python 3.9+, standard library only.

What catstack's judge.py computed itself comes from the binary, never a copy:
runners() and DEFAULT_RUNNERS / INVESTIGATE_RUNNERS print `llm-judge runners`, ask() and
run_runner() run `llm-judge ask`, run_job() runs `llm-judge run`. verdict() is the one
rule kept in Python (it is pure and called per job); the daemon's core/verdict.rs and
tests/test_judge.py check both against tests/fixtures/verdict_cases.json.
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
import types
import uuid

TIMEOUT_SECONDS = 60
INVESTIGATE_TIMEOUT_CAP = 600
KILL_GRACE_SECONDS = 5
# llm-judge's config keys for the three constants above, and their shipped values. A
# constant a caller (or test) changed is passed to the binary with --set when it is
# read (at call time); left alone, llm-judge's config decides.
_CONFIG_KEYS = (
    ("TIMEOUT_SECONDS", "default_timeout_seconds", 60),
    ("INVESTIGATE_TIMEOUT_CAP", "max_timeout_seconds", 600),
    ("KILL_GRACE_SECONDS", "kill_grace_seconds", 5),
)
# How long catstack's judge left a runner out after it failed (not installed, non-zero
# exit). llm-judge benches instead (tried last, not skipped) for a backoff from its
# config ([health]: 60 s doubling up to 6 h). A caller that changes this constant gets
# catstack's fixed window: both backoff keys are passed with --set.
UNAVAILABLE_SECONDS = 6 * 3600
_UNAVAILABLE_SHIPPED = UNAVAILABLE_SECONDS
# Attempts carry llm-judge's extra `elapsed_ms`; ask() and run_job() drop it (catstack's
# shape) unless a caller sets this. Verdict files and drain() keep it.
ATTEMPT_ELAPSED_MS = False
NOT_INSTALLED = "not installed"
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
    # One event per line (docs/reference.md, "judge.log"): control characters are escaped.
    return "".join(ch if ch >= " " and ch != "\x7f" else json.dumps(ch)[1:-1] for ch in text)


def log(message: str) -> None:
    """Appends one whole line to <state>/judge.log (UTC timestamp, control characters escaped)."""
    root = state_root()
    _make_dirs(root)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = f"{stamp}  INFO judge.py: {_escape(str(message))}\n".encode("utf-8", "replace")
    # Readable too: the last byte says whether a crash cut the last line short.
    fd = os.open(os.path.join(root, "judge.log"), os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        size = os.fstat(fd).st_size
        # A line a crash cut short is ended first: no record is glued to a torn one.
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
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


def _make_dirs(folder: str) -> None:
    """os.makedirs (0700), each folder it creates made durable by an fsync of its parent."""
    missing = []
    probe = os.path.abspath(folder)
    while not os.path.lexists(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    os.makedirs(folder, mode=0o700, exist_ok=True)
    for created in reversed(missing):
        _fsync_dir(os.path.dirname(created))


def write_json_atomic(path: str, data: dict) -> None:
    """Publishes JSON at path: hidden temp file in the same folder, fsync, rename, folder fsync."""
    folder = os.path.dirname(path)
    _make_dirs(folder)
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


def _publish_new(path: str, data: dict) -> bool:
    """write_json_atomic that never replaces a file: False when `path` already exists.

    A hard link, unlike a rename, cannot take a name someone holds, so two producers of
    one id cannot both publish; on a file system without hard links, look then rename.
    """
    folder = os.path.dirname(path)
    _make_dirs(folder)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, path)
        except FileExistsError:
            return False
        except OSError:
            if os.path.lexists(path):
                return False
            os.replace(temp, path)
    finally:
        try:
            os.unlink(temp)
        except OSError:
            pass
    _fsync_dir(folder)
    return True


def verdict_dir(transcript: str) -> str:
    """<state>/verdicts/<first 16 hex of sha1(transcript)>."""
    digest = hashlib.sha1(transcript.encode("utf-8")).hexdigest()[:16]
    return os.path.join(state_root(), "verdicts", digest)


def clip(label: str, detail: str) -> str:
    """`<label>: <detail>` within 300 code points, keeping the end of the detail (docs/reference.md, "Runners")."""
    detail = (detail or "").strip()
    room = REASON_LIMIT - len(label) - 2
    if not detail or room <= 0:
        return label[:REASON_LIMIT]
    return f"{label}: {detail[-room:]}"


_clip = clip


def _last_meaningful_line(reason: str) -> str:
    """A reason of several lines as its label (up to the first ": ") and its last non-blank line."""
    reason = reason.strip()
    if "\n" not in reason:
        return reason
    label = reason.split(": ", 1)[0]
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if last.startswith(label) else f"{label}: {last}"


def _fair_cap(lengths: list, room: int) -> int:
    """The largest length each part may keep so that all fit in `room` together."""
    if sum(lengths) <= room:
        return 1 << 62
    left = room
    ordered = sorted(lengths)
    for i, length in enumerate(ordered):
        share = left // (len(ordered) - i)
        if length > share:
            return share
        left -= length
    return 1 << 62


def no_answer_reason(attempts: list) -> str:
    """`no runner answered: <runner>: <reason>; ...`, each runner keeping its own part (its label and the last line of
    its detail), with a fair share of the 300 code points when they do not all fit."""
    label = "no runner answered"
    if not attempts:
        return label
    parts = [(f"{a.get('runner')}: ", _last_meaningful_line(str(a.get("reason")))) for a in attempts]
    room = max(0, REASON_LIMIT - len(label) - 2 - 2 * (len(parts) - 1))
    cap = _fair_cap([len(r) + len(t) for r, t in parts], room)
    kept = []
    for runner, text in parts:
        keep = max(0, cap - len(runner))
        kept.append(runner + (text[len(text) - keep:] if len(text) > keep else text))
    return clip(label, "; ".join(kept))


def clip_prompt_field(text: object) -> str:
    """One prompt field, trimmed and capped to its last PROMPT_FIELD_CAP characters."""
    return str(text or "").strip()[-PROMPT_FIELD_CAP:]


_clip_field = clip_prompt_field


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
    """llm-judge's subagent rule (docs/reference.md, "The catstack drop-in"): a subagent marker key, or a subagent transcript."""
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
        + "; install it (cargo install --locked --path .) or set " + BIN_ENV
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


def _is_seconds(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _set_flags() -> list:
    """`--set KEY=VALUE` for each of this module's constants a caller changed, read now."""
    now = {name: globals()[name] for name, _, _ in _CONFIG_KEYS}
    for name, value in now.items():
        if not _is_seconds(value) or value < 0 or (value == 0 and name != "KILL_GRACE_SECONDS"):
            raise ValueError(f"judge.{name} is {value!r}; give a positive number of seconds")
    cap = now["INVESTIGATE_TIMEOUT_CAP"]
    # llm-judge refuses a default above the cap; a lowered cap lowers the default too.
    now["TIMEOUT_SECONDS"] = min(now["TIMEOUT_SECONDS"], cap)
    flags = []
    for name, key, shipped in _CONFIG_KEYS:
        changed = now[name] != shipped or (name == "TIMEOUT_SECONDS" and cap != 600)
        if changed:
            flags += ["--set", f"{key}={float(now[name])!r}"]
    window = UNAVAILABLE_SECONDS
    if window != _UNAVAILABLE_SHIPPED:
        if not _is_seconds(window) or window <= 0:
            raise ValueError(f"judge.UNAVAILABLE_SECONDS is {window!r}; give a positive number of seconds")
        for key in ("health.backoff_start_seconds", "health.backoff_max_seconds"):
            flags += ["--set", f"{key}={float(window)!r}"]
    return flags


def _call(args: list, stdin: str = "", env: dict | None = None) -> subprocess.CompletedProcess:
    """Runs `llm-judge ARGS` (with --set for changed constants); exit 2 (usage, config) is a ValueError."""
    argv = [find_binary(), *_set_flags(), *args]
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, encoding="utf-8",
                          errors="replace", check=False, env=env)
    if proc.returncode == 2:
        raise ValueError(proc.stderr.strip() or f"llm-judge exited 2: {argv}")
    return proc


def _table(args: list) -> list:
    proc = _call(["runners", *args])
    try:
        rows = json.loads(proc.stdout)
        return [(str(name), [str(item) for item in argv]) for name, argv in rows]
    except (ValueError, TypeError) as exc:
        raise RuntimeError(f"llm-judge runners exited {proc.returncode} and printed no table "
                           f"({exc}): {proc.stderr.strip()}") from exc


def runners(mode: object = None) -> list:
    """The table llm-judge uses for mode, as [(name, argv)]: CATSTACK_LLM_JUDGE_RUNNERS, else the
    config file (LLM_JUDGE_CONFIG, $XDG_CONFIG_HOME/llm-judge/config.toml), else the shipped table;
    an API runner is [name, ["api:<protocol>", model, base URL]] (not a command).
    A bad variable or config is a ValueError naming it (from `llm-judge runners`)."""
    return _table(["--mode", "investigate" if mode == "investigate" else "default"])


def __getattr__(name: str):
    """DEFAULT_RUNNERS, INVESTIGATE_RUNNERS, SLIM_CLAUDE_ARGV and JUDGE_SYSTEM_PROMPT: the
    tables shipped in the binary (`llm-judge runners --shipped`), read on first use."""
    if name in ("DEFAULT_RUNNERS", "INVESTIGATE_RUNNERS"):
        mode = "investigate" if name == "INVESTIGATE_RUNNERS" else "default"
        value = tuple(_table(["--shipped", "--mode", mode]))
    elif name == "SLIM_CLAUDE_ARGV":
        value = list(dict(__getattr__("DEFAULT_RUNNERS")).get("claude", []))
    elif name == "JUDGE_SYSTEM_PROMPT":
        argv = __getattr__("SLIM_CLAUDE_ARGV")
        flag = argv.index("--system-prompt") if "--system-prompt" in argv[:-1] else None
        value = argv[flag + 1] if flag is not None else ""
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


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
    errors = io.StringIO()
    try:
        rows = events.write_events(
            hook, "judge", {"session_id": transcript},
            [finding(rule_id, transcript, reason if isinstance(reason, str) else "", "")],
            "", "judge", 0, stderr=errors,
            action=outcome if outcome in ("hit", "clean", "unchecked") else "unchecked",
            finding_id=finding_id,
        )
    except Exception as exc:
        log(f"drain: event write failed for verdict {finding_id}: {type(exc).__name__}: {exc}")
        return
    if not rows:
        detail = errors.getvalue().strip() or "shared event writer returned no row"
        log(f"drain: event write failed for verdict {finding_id}: {detail}")


def _record_finished(job: dict, verdict: dict) -> None:
    """catstack's `judge_finished` stage event, for a job run_job() judged."""
    loaded = _load_events()
    if loaded is None:
        return
    errors = io.StringIO()
    try:
        written = loaded[0].write_stage_event(
            _job_hook(job), _job_harness(job), str(job.get("transcript") or ""), "judge_finished",
            str(verdict.get("outcome") or "unchecked"), str(job.get("id") or "unknown"), stderr=errors,
        )
    except Exception as exc:
        written, errors = False, io.StringIO(f"{type(exc).__name__}: {exc}")
    if not written:
        log(f"job {job.get('id')}: finished event not written: {errors.getvalue().strip()}")


def _reap() -> None:
    _spawned[:] = [proc for proc in _spawned if proc.poll() is None]


def _start_run(job_path: str, flags: list) -> None:
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
            [binary, *flags, "run", job_path],
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
    """Publishes jobs/<id>.json and returns the id; None inside a runner or for a subagent job.

    ValueError for an id that is not a plain file name or whose job is still queued."""
    if CHILD_ENV in os.environ:
        return None
    if is_subagent_job(job):
        return None
    job = dict(job)
    job_id = str(job.get("id") or uuid.uuid4().hex)
    if os.path.basename(job_id) != job_id or job_id.startswith(".") or "\0" in job_id or job_id in ("", ".."):
        raise ValueError(f"job id {job_id!r} is not a plain file name")
    job["id"] = job_id
    flags = _set_flags()
    # A changed TIMEOUT_SECONDS reaches a daemon through the job (its other constants
    # cannot: kill grace and the cap stay the daemon's config).
    if job.get("timeout_seconds") is None and TIMEOUT_SECONDS != _CONFIG_KEYS[0][2]:
        job["timeout_seconds"] = TIMEOUT_SECONDS
    root = state_root()
    job_path = os.path.join(root, "jobs", f"{job_id}.json")
    # Replacing a queued job would give two enqueues one verdict.
    if not _publish_new(job_path, job):
        raise ValueError(f"job id {job_id!r} is still queued ({job_path}); wait for its verdict or pick another id")
    _reap()
    if not daemon_running(root):
        _start_run(job_path, flags)
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


def _hit_rule(job: dict):
    """("any", {key: notice}) or ("all", [keys]); a wrong shape is a ValueError, as a job error in llm-judge."""
    any_true = job.get("hit_if_any_true")
    if any_true is not None:
        if not isinstance(any_true, dict) or not all(isinstance(v, str) for v in any_true.values()):
            raise ValueError('"hit_if_any_true" must be an object of key to notice text')
        return "any", any_true
    keys = job.get("hit_if_all_true")
    keys = [] if keys is None else keys
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ValueError('"hit_if_all_true" must be a list of strings')
    return "all", keys


def _decide(job: dict, answer: dict) -> tuple:
    """(outcome, reason, on_hit or None) of an answer under the job's rule (docs/reference.md, "Verdict file")."""
    kind, rule = _hit_rule(job)
    if kind == "any":
        hits = [key for key in rule if answer.get(key) is True]
        if not hits:
            return "clean", clip("none true", ", ".join(rule)), None
        return "hit", clip("any true", ", ".join(hits)), "\n".join(rule[key] for key in hits)
    not_true = [key for key in rule if answer.get(key) is not True]
    if not_true:
        return "clean", clip("not true", ", ".join(not_true)), None
    return "hit", clip("all true", ", ".join(rule)), None


def verdict(job: dict, result: dict) -> dict:
    """The verdict of a job from an ask() result, by llm-judge's rules (docs/reference.md, "Verdict file": hit_if_any_true
    first, then hit_if_all_true; only JSON true counts; reasons clipped to 300). The daemon's
    core/verdict.rs and this function are checked on the same cases (tests/fixtures/verdict_cases.json)."""
    answer = result.get("answer") if result.get("outcome") == "answered" else None
    attempts = list(result.get("attempts") or [])
    judged = {
        "id": job.get("id"), "hook": job.get("hook"), "transcript": job.get("transcript"),
        "outcome": "unchecked", "on_hit": job.get("on_hit"), "reason": "", "runner": None,
        "answer": None, "attempts": attempts, "finished_at": time.time(),
    }
    if isinstance(answer, dict):
        outcome, reason, notices = _decide(job, answer)
        judged.update(outcome=outcome, reason=reason, runner=result.get("runner"), answer=answer)
        if notices is not None:
            judged["on_hit"] = notices
    else:
        judged["reason"] = no_answer_reason([a for a in attempts if isinstance(a, dict)])
    if isinstance(job.get("rule_id"), str) and job["rule_id"]:
        judged["rule_id"] = job["rule_id"]
    return judged


def bounded_timeout(timeout_seconds: object) -> float:
    """A per-runner timeout as llm-judge applies it (docs/reference.md, "Job file"), with this module's constants:
    not a positive number gives TIMEOUT_SECONDS; above INVESTIGATE_TIMEOUT_CAP, the cap."""
    if not _is_seconds(timeout_seconds) or timeout_seconds <= 0:
        timeout_seconds = TIMEOUT_SECONDS
    return min(timeout_seconds, INVESTIGATE_TIMEOUT_CAP)


def _catstack_shape(record: dict) -> dict:
    """The record with `elapsed_ms` dropped from its attempts, unless ATTEMPT_ELAPSED_MS."""
    if ATTEMPT_ELAPSED_MS or not isinstance(record.get("attempts"), list):
        return record
    attempts = [{k: v for k, v in a.items() if k != "elapsed_ms"} if isinstance(a, dict) else a
                for a in record["attempts"]]
    return dict(record, attempts=attempts)


def _unchecked(reason: str) -> dict:
    return {"outcome": "unchecked", "runner": None, "answer": None,
            "attempts": [{"runner": "llm-judge", "ok": False, "reason": clip("judge error", reason)}]}


def unavailable_path(name: str) -> str:
    """Where catstack's judge.py kept a left-out runner's marker. llm-judge keeps runner
    health in <state>/health.json (`llm-judge status`) and never writes this file; the
    name stays for callers that import it."""
    digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:16]
    return os.path.join(state_root(), "unavailable", f"{digest}.json")


_REAL_TIME = time.time
_said_no_now = False


def _callers_clock() -> list:
    """`--now T` when the caller replaced time.time (a test's patch, freezegun): its clock
    then decides the bench windows, as in catstack's judge.py. On the real clock nothing
    is passed (the binary's clock is the same), so a binary older than `ask --now` still
    answers: catstack users replace judge.py and the binary separately."""
    if time.time is _REAL_TIME and isinstance(_REAL_TIME, types.BuiltinFunctionType):
        return []
    return ["--now", repr(time.time())]


def _refused_now(exc: ValueError) -> bool:
    """True when the binary's command line refused `--now` (clap 4's words, and 2's)."""
    text = str(exc)
    return "'--now'" in text and ("unexpected argument" in text or "wasn't expected" in text)


def _call_ask(args: list, stdin: str, env: dict | None) -> subprocess.CompletedProcess:
    """`llm-judge ask` with the caller's clock when it is patched; a binary older than
    `--now` gets the call once more without it (logged once per process)."""
    global _said_no_now
    clock = _callers_clock()
    try:
        return _call(args + clock, stdin=stdin, env=env)
    except ValueError as exc:
        if not clock or not _refused_now(exc):
            raise
    if not _said_no_now:
        _said_no_now = True
        log("ask: this llm-judge binary has no --now (older than this judge.py): runner benches "
            "follow its own clock, not this process's time.time; update the binary to match")
    return _call(args, stdin=stdin, env=env)


def _ask_binary(prompt: object, mode: object, timeout_seconds: object, cwd: object, env: dict | None = None) -> dict:
    args = ["ask", "--prompt-file", "-"]
    if mode == "investigate":
        args += ["--mode", "investigate"]
    if _is_seconds(timeout_seconds):
        args += ["--timeout", repr(float(timeout_seconds))]
    if isinstance(cwd, str) and cwd:
        args += ["--cwd", cwd]
    elif cwd is not None:
        log(f"ask: refused cwd {cwd!r}: not a folder path; the runners get a fresh temp folder")
    proc = _call_ask(args, str(prompt), env)
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return _unchecked(f"llm-judge ask exited {proc.returncode}: {proc.stderr.strip()}")
    if not isinstance(result, dict):
        return _unchecked(f"llm-judge ask printed {proc.stdout.strip()[:100]!r}")
    return _catstack_shape(result)


def run_runner(name: str, argv: list, prompt: str, timeout_seconds: object = None, cwd: object = None) -> tuple:
    """Runs one runner (this argv, as given) through `llm-judge ask` and returns (attempt,
    answer or None). Like CATSTACK_LLM_JUDGE_RUNNERS, the argv skips llm-judge's safety check."""
    env = dict(os.environ)
    env[RUNNERS_ENV] = json.dumps([[name, list(argv)]])
    result = _ask_binary(prompt, None, bounded_timeout(timeout_seconds), cwd, env=env)
    attempts = result.get("attempts") or [{"runner": name, "ok": False, "reason": "judge error: no attempt"}]
    answer = result.get("answer") if result.get("outcome") == "answered" else None
    return attempts[0], answer


_OWN_RUN_RUNNER = run_runner


def _ask_through_run_runner(prompt: object, mode: object, timeout_seconds: object, cwd: object) -> dict:
    """catstack's loop, for a caller that replaced run_runner: each runner of the table, in order."""
    if timeout_seconds is None:
        timeout_seconds = TIMEOUT_SECONDS
    attempts = []
    for name, argv in runners(mode):
        attempt, answer = run_runner(name, argv, str(prompt), timeout_seconds=timeout_seconds, cwd=cwd)
        attempts.append(attempt)
        if answer is not None:
            return {"outcome": "answered", "runner": name, "answer": answer, "attempts": attempts}
    return {"outcome": "unchecked", "runner": None, "answer": None, "attempts": attempts}


def ask(prompt: str, mode: object = None, timeout_seconds: object = None, cwd: object = None) -> dict:
    """Runs `llm-judge ask` (prompt on stdin): {"outcome": "answered"|"unchecked", "runner", "answer",
    "attempts"}. With no timeout_seconds, TIMEOUT_SECONDS as it is now (when changed) or llm-judge's
    default. When a caller replaced run_runner, goes through it instead, one call per runner."""
    if run_runner is not _OWN_RUN_RUNNER:
        return _ask_through_run_runner(prompt, mode, timeout_seconds, cwd)
    return _ask_binary(prompt, mode, timeout_seconds, cwd)


def _read_job(path: str) -> dict:
    stem = os.path.splitext(os.path.basename(path))[0]
    try:
        with open(path, encoding="utf-8") as handle:
            loaded = json.load(handle)
    except (OSError, ValueError):
        return {"id": stem}
    job = dict(loaded) if isinstance(loaded, dict) else {}
    job.setdefault("id", stem)
    return job


def _run_job_in_process(path: str, job: dict) -> dict:
    """catstack's run_job, for a caller that replaced run_runner (no claim: a test's helper)."""
    stem = os.path.splitext(os.path.basename(path))[0]
    try:
        if "prompt" not in job:
            raise ValueError(f"job file {path} has no prompt or is not a JSON object")
        timeout = job.get("timeout_seconds")
        result = verdict(job, ask(str(job["prompt"]), mode=job.get("mode"),
                                  timeout_seconds=TIMEOUT_SECONDS if timeout is None else timeout,
                                  cwd=job.get("cwd")))
    except Exception as exc:
        log(f"job {job.get('id')} failed: {type(exc).__name__}: {exc}")
        result = verdict(job, {"outcome": "unchecked", "attempts": []})
        result["reason"] = f"judge error: {type(exc).__name__}: {exc}"[:REASON_LIMIT]
    write_json_atomic(os.path.join(verdict_dir(str(job.get("transcript") or "")), f"{stem}.json"), result)
    try:
        os.remove(path)
    except OSError as exc:
        log(f"job {job.get('id')}: verdict written but the job file could not be deleted: {exc}")
    return result


def _run_job_binary(path: str, job: dict) -> dict:
    stem = os.path.splitext(os.path.basename(path))[0]
    transcript = job.get("transcript") if isinstance(job.get("transcript"), str) else ""
    try:
        proc = _call(["run", path])
        said = f"exit {proc.returncode}: {proc.stderr.strip()}"
    except ValueError as exc:  # a config error: llm-judge leaves the job queued
        said = str(exc)
    try:
        with open(os.path.join(verdict_dir(transcript), f"{stem}.json"), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        return {"id": stem, "transcript": transcript, "outcome": "unchecked",
                "reason": clip("judge error: no verdict after llm-judge run", f"{exc}; {said}")}


def run_job(path: str) -> dict:
    """Judges one job file now with `llm-judge run` and returns its verdict (left for drain).
    When a caller replaced run_runner, judges in this process through it instead."""
    job = _read_job(path)
    if run_runner is not _OWN_RUN_RUNNER:
        result = _run_job_in_process(path, job)
    else:
        result = _run_job_binary(path, job)
    _record_finished(job, result)
    return _catstack_shape(result)


def main(argv: list) -> int:
    """`judge.py run JOB` runs `llm-judge run JOB`."""
    if len(argv) == 2 and argv[0] == "run":
        try:
            binary = find_binary()
        except FileNotFoundError as exc:
            print(f"catstack-hook-error llm-judge: {exc}", file=sys.stderr)
            return 1
        return subprocess.run([binary, *_set_flags(), "run", argv[1]], check=False).returncode
    print("usage: judge.py run <job path>", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
