//! How errors are shown. An error's own message is short and names what it is about
//! (a path, a key, a pid); its cause is kept as its `source`, not pasted into the
//! message. Where an error is shown (the command line, judge.log, a verdict's reason)
//! it is shown with its causes: `Chain` prints `message: cause: cause…`.

use std::error::Error;
use std::fmt;

/// An error and every cause under it, one line: `message: cause: cause…`.
pub struct Chain<'a>(pub &'a (dyn Error + 'a));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

/// `error.chain()`: an error shown with its causes (`Chain`).
pub trait Chained {
    /// This error and every cause under it, for a message.
    fn chain(&self) -> Chain<'_>;
}

impl<E: Error> Chained for E {
    fn chain(&self) -> Chain<'_> {
        Chain(self)
    }
}

/// `error` with its causes, as text (`Chain`).
pub fn chain(error: &dyn Error) -> String {
    Chain(error).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot open claim /s/claims/j.json")]
    struct Open {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error(transparent)]
        Claim(#[from] Open),
    }

    #[test]
    fn a_chain_is_the_message_then_each_cause() {
        let inner = std::io::Error::from_raw_os_error(libc::EACCES);
        let shown = inner.to_string();
        let e = Outer::Claim(Open { source: inner });
        assert_eq!(e.to_string(), "cannot open claim /s/claims/j.json");
        assert_eq!(
            chain(&e),
            format!("cannot open claim /s/claims/j.json: {shown}")
        );
        let bare = std::io::Error::other("disk full");
        assert_eq!(chain(&bare), "disk full");
    }
}
