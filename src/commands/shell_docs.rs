//! `llm-judge completions SHELL` and `llm-judge man`: shell completion scripts and man
//! pages generated from the command line's own definition, so they never drift from it.

use std::path::{Path, PathBuf};

use crate::support::exit::{EXIT_FAILURE, EXIT_OK};

/// `man` flags.
#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Write llm-judge.1 and one page per command (llm-judge-daemon.1, …) into DIR
    /// instead of printing llm-judge.1.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// Prints the completion script of `shell` for `command`.
pub fn completions(mut command: clap::Command, shell: clap_complete::Shell) -> i32 {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "llm-judge", &mut script);
    print_bytes(&script)
}

/// Prints the man page of `command`, or writes every command's page into a folder.
pub fn man(command: clap::Command, args: &ManArgs) -> i32 {
    match &args.out_dir {
        Some(dir) => write_pages(command, dir),
        None => {
            let mut page = Vec::new();
            match clap_mangen::Man::new(command).render(&mut page) {
                Ok(()) => print_bytes(&page),
                Err(e) => {
                    say_err!("llm-judge man: cannot render the page: {e}");
                    EXIT_FAILURE
                }
            }
        }
    }
}

fn write_pages(command: clap::Command, dir: &Path) -> i32 {
    let written =
        std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(command, dir));
    match written {
        Ok(()) => {
            // `man -M` wants a man1/ folder inside; a path with a slash is read as a file.
            let page = dir.join("llm-judge.1");
            let page = match page.is_absolute() || page.starts_with(".") {
                true => page,
                false => Path::new(".").join(page),
            };
            say!(
                "man pages written to {} (read one with: man {})",
                dir.display(),
                page.display()
            );
            EXIT_OK
        }
        Err(e) => {
            say_err!(
                "llm-judge man: cannot write the pages into {}: {e}; give a folder you can write",
                dir.display()
            );
            EXIT_FAILURE
        }
    }
}

fn print_bytes(bytes: &[u8]) -> i32 {
    if crate::support::exit::print_stdout(&String::from_utf8_lossy(bytes)) {
        EXIT_OK
    } else {
        EXIT_FAILURE
    }
}
