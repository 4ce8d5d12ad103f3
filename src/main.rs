//! The `llm-judge` binary: parses the command line and hands off to `cli`.

fn main() {
    std::process::exit(llm_judge::cli::main());
}
