//! The `llm-judge` binary: parses the command line and hands off to the library.

fn main() {
    std::process::exit(llm_judge::main());
}
