//! `<state>/child.key`: the proof that a process is one of the judge's own runners. A
//! runner of the judge gets `CATSTACK_LLM_JUDGE_CHILD=1` (catstack's marker, which
//! `enqueue` and catstack's judge.py honour) and `LLM_JUDGE_CHILD_TOKEN=<this key>`.
//! `llm-judge hook` skips a call only when the token is its state folder's key: a bare
//! marker is what a project's settings `env` can set to switch the judge off
//! (docs/security.md, "Hook mode"). Made and read like `tag.key` (`store::tag_key`).

use std::io;

use crate::store::state_dir::StateDir;
use crate::store::tag_key::{load_or_create_at, read_key};

/// Makes (once) the folder's key and hands it to every runner this process starts;
/// read once a process (a reload or a hook's second judge finds it given).
pub fn give_runners(state: &StateDir) {
    if crate::process::spawn::has_child_token() {
        return;
    }
    match load_or_create_at(&state.root, &state.child_key()) {
        Ok(key) => crate::process::spawn::set_child_token(key),
        Err(e) => tracing::warn!(
            "{e}: the judge's runners carry no child token, so a hook they fire judges them too"
        ),
    }
}

/// Whether `token` (the caller's `LLM_JUDGE_CHILD_TOKEN`) is the folder's key.
pub fn is_childs(state: &StateDir, token: Option<&str>) -> io::Result<bool> {
    let Some(token) = token else {
        return Ok(false);
    };
    let key = read_key(&state.child_key())?;
    Ok(constant_time_eq(key.as_bytes(), token.trim().as_bytes()))
}

/// Equal bytes, compared in a time that does not depend on where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_folders_own_key_is_a_childs() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        assert!(is_childs(&state, Some("1")).is_err(), "no key yet");
        let key = load_or_create_at(&state.root, &state.child_key()).unwrap();
        assert!(is_childs(&state, Some(&key)).unwrap());
        assert!(!is_childs(&state, Some("1")).unwrap());
        assert!(!is_childs(&state, None).unwrap());
        assert!(!is_childs(&state, Some(&key[..31])).unwrap());
        let other = tempfile::tempdir().unwrap();
        let theirs = load_or_create_at(other.path(), &other.path().join("child.key")).unwrap();
        assert!(!is_childs(&state, Some(&theirs)).unwrap());
    }
}
