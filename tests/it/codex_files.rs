//! The judge's own files for codex (issue 42): the instructions of each table and the
//! trimmed model catalog the daemon keeps, filled into a codex argv's placeholders.
//! A fake `codex` prints a catalog for `debug models`, and otherwise records its argv
//! and the content of the files it was pointed at.

use crate::support::*;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

/// What the fake prints for `codex debug models`: a model whose entry adds tools.
const CATALOG: &str = r#"{"models": [{"slug": "gpt-x", "tool_mode": "code_mode_only",
"experimental_supported_tools": ["clock"], "multi_agent_version": "v2",
"apply_patch_tool_type": "freeform", "base_instructions": "kept"}]}"#;

/// A fake codex; each run leaves `rec/<n>.argv`, and `.instructions` / `.catalog`
/// copies of the files its `-c` values name.
fn fake_codex(w: &World) -> String {
    fs::create_dir_all(w.path("rec")).unwrap();
    fs::write(w.path("catalog.json"), CATALOG).unwrap();
    let path = w.path("bin/codex");
    install_exe(
        &path,
        &format!(
            "[ -n \"$FAKE_PROBE\" ] && exit 0\n\
             [ \"$1\" = debug ] && exec cat {catalog}\n\
             R={rec}/$(date +%s%N)\n\
             printf '%s\\0' \"$@\" > $R.argv\n\
             for a in \"$@\"; do case \"$a\" in\n\
             model_instructions_file=*) f=${{a#*=\\\"}}; cat \"${{f%\\\"}}\" > $R.instructions;;\n\
             model_catalog_json=*) f=${{a#*=\\\"}}; cat \"${{f%\\\"}}\" > $R.catalog;;\n\
             esac; done\n\
             echo '{{\"ok\": true}}'",
            catalog = w.path("catalog.json").display(),
            rec = w.path("rec").display()
        ),
    );
    path.to_str().unwrap().to_string()
}

/// The runs recorded so far, oldest first: (argv, instructions, catalog).
fn runs(w: &World) -> Vec<(Vec<String>, Option<String>, Option<String>)> {
    let mut stems: Vec<String> = fs::read_dir(w.path("rec"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".argv")
                .map(String::from)
        })
        .collect();
    stems.sort();
    stems
        .iter()
        .map(|stem| {
            let read = |ext: &str| fs::read_to_string(w.path(&format!("rec/{stem}.{ext}"))).ok();
            let argv = read("argv").unwrap_or_default();
            let argv = argv.split('\0').filter(|a| !a.is_empty()).map(String::from);
            (argv.collect(), read("instructions"), read("catalog"))
        })
        .collect()
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
}

/// The `-c` value of `key` in `argv`, unquoted.
fn config_value<'a>(argv: &'a [String], key: &str) -> Option<&'a str> {
    argv.iter()
        .find_map(|a| a.strip_prefix(&format!("{key}=")))
        .map(|v| v.trim_matches('"'))
}

#[test]
fn the_daemon_keeps_a_trimmed_catalog_and_every_codex_start_gets_the_judges_files() {
    let w = World::new();
    let mark = new_mark("codex-files");
    let _reaper = Reaper::new(&mark);
    let fake = fake_codex(&w);
    let runner = |table: &[&str]| json!(["codex", pinned::with_program(table, &fake)]);
    let default = [runner(pinned::DEFAULT_CODEX)];
    write_config(&w, "fsync = false\n");
    let mut d = w.start_with(command(&w, Some(&default), &mark));
    w.job("a", &json!({"prompt": "first", "hit_if_all_true": ["ok"]}));
    wait_for("a judged", NO_HANG, || w.verdicts().len() == 1);
    assert_eq!(w.verdict("a")["outcome"], "hit", "{}", w.log());

    let folder = w.state().join("codex");
    let instructions = folder.join("instructions-default.md");
    let (argv, told, catalog) = runs(&w).pop().unwrap();
    assert_eq!(
        config_value(&argv, "model_instructions_file"),
        instructions.to_str()
    );
    assert!(
        told.as_deref()
            .is_some_and(|t| t.starts_with("You answer one question about a coding session.")),
        "{told:?}"
    );
    let kept = config_value(&argv, "model_catalog_json").expect("a catalog was passed");
    assert!(
        kept.starts_with(folder.join("catalog-").to_str().unwrap()),
        "{kept}"
    );
    let catalog: Value = serde_json::from_str(&catalog.unwrap()).unwrap();
    let model = &catalog["models"][0];
    for field in ["tool_mode", "multi_agent_version", "apply_patch_tool_type"] {
        assert_eq!(model[field], Value::Null, "{field}: {catalog}");
    }
    assert_eq!(model["experimental_supported_tools"], json!([]));
    assert_eq!(model["base_instructions"], "kept");
    assert!(
        argv.contains(&"gpt-x".to_string()),
        "the catalog's model: {argv:?}"
    );
    assert_eq!(
        (mode(&folder), mode(&instructions), mode(Path::new(kept))),
        (0o700, 0o600, 0o600)
    );

    // A missing instructions file is written again before the next start.
    fs::remove_file(&instructions).unwrap();
    w.job("b", &json!({"prompt": "second", "hit_if_all_true": ["ok"]}));
    wait_for("b judged", NO_HANG, || w.verdicts().len() == 2);
    assert_eq!(w.verdict("b")["outcome"], "hit", "{}", w.log());
    assert!(runs(&w).pop().unwrap().1.is_some_and(|t| !t.is_empty()));
    d.signal("TERM");
    assert!(d.wait_exit(Duration::from_secs(30)).success());

    // `run` uses the catalog the daemon kept for this codex, and the investigate
    // instructions for an investigate job.
    fs::create_dir_all(w.path("work")).unwrap();
    let investigate = [runner(pinned::INVESTIGATE_CODEX)];
    let job = json!({"prompt": "look", "mode": "investigate", "cwd": w.path("work"),
        "hit_if_all_true": ["ok"]});
    // `llm-judge run` on queued job `name`, which must succeed.
    let run = |name: &str| {
        let out = command(&w, Some(&investigate), &mark)
            .arg("run")
            .arg(w.state().join(format!("jobs/{name}.json")))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    w.job("c", &job);
    run("c");
    let (argv, told, catalog) = runs(&w).pop().unwrap();
    assert_eq!(config_value(&argv, "model_catalog_json"), Some(kept));
    assert!(catalog.is_some());
    assert!(
        told.is_some_and(|t| t.contains("read-only shell commands")),
        "{argv:?}"
    );

    // Another version of codex (here: the fake changed on disk) never gets that
    // catalog: `run` reads the new one's catalog (there is none for it yet) and passes
    // that; the other version's copy is gone.
    install_exe(
        Path::new(&fake),
        &format!(
            "{}\n# upgraded\n",
            fs::read_to_string(&fake)
                .unwrap()
                .trim_start_matches("#!/bin/sh\n")
        ),
    );
    w.job("d", &job);
    run("d");
    let (argv, _, catalog) = runs(&w).pop().unwrap();
    let fresh = config_value(&argv, "model_catalog_json").expect("the new codex's catalog");
    assert_ne!(fresh, kept);
    assert!(!Path::new(kept).exists(), "the old version's catalog went");
    assert!(catalog.is_some_and(|c| c.contains("gpt-x")));

    // A codex whose catalog cannot be read starts without one: the item and its -c
    // are dropped.
    fs::write(w.path("catalog.json"), "no catalog").unwrap();
    install_exe(
        Path::new(&fake),
        &format!(
            "{}\n# upgraded again\n",
            fs::read_to_string(&fake)
                .unwrap()
                .trim_start_matches("#!/bin/sh\n")
        ),
    );
    w.job("e", &job);
    run("e");
    let (argv, _, catalog) = runs(&w).pop().unwrap();
    assert_eq!(catalog, None);
    assert!(
        !argv.iter().any(|a| a.starts_with("model_catalog_json")),
        "{argv:?}"
    );
    assert!(
        !argv.windows(2).any(|p| p[0] == "-c" && p[1] == "-c"),
        "the dropped item's -c went too: {argv:?}"
    );
}

/// `ask` and `run` on a state folder where no daemon has run read the catalog once and
/// keep it (a slim codex without it sends a request about five times larger), and the
/// read runs as a runner does: in a fresh folder, with `GIT_DIR=/dev/null`, and a child
/// it leaves behind (even in a session of its own) is stopped with it.
#[test]
fn ask_and_run_keep_the_catalog_once_and_the_read_runs_like_a_runner() {
    let w = World::new();
    let mark = new_mark("codex-catalog-once");
    let _reaper = Reaper::new(&mark);
    fs::create_dir_all(w.path("rec")).unwrap();
    fs::write(w.path("catalog.json"), CATALOG).unwrap();
    let escape = w.script(
        "escape.sh",
        &format!(
            "hostpid > {}.tmp\nmv {0}.tmp {0}\nexec sleep 300",
            w.path("rec/escapee.pid").display()
        ),
    );
    let fake = w.path("bin/codex");
    install_exe(
        &fake,
        &format!(
            "if [ \"$1\" = debug ]; then\n\
               pwd > {rec}/debug.pwd; echo \"$GIT_DIR\" > {rec}/debug.git\n\
               setsid /bin/sh {escape} &\n\
               while [ ! -s {rec}/escapee.pid ]; do sleep 0.01; done\n\
               echo x >> {rec}/debug.count; exec cat {catalog}\n\
             fi\n\
             for a in \"$@\"; do case \"$a\" in\n\
             model_catalog_json=*) echo \"$a\" >> {rec}/catalogs;;\n\
             esac; done\n\
             echo '{{\"ok\": true}}'",
            catalog = w.path("catalog.json").display(),
            rec = w.path("rec").display(),
            escape = escape.display()
        ),
    );
    let fake = fake.to_str().unwrap().to_string();
    let table = [json!([
        "codex",
        pinned::with_program(pinned::DEFAULT_CODEX, &fake)
    ])];
    let ask = command(&w, Some(&table), &mark)
        .args(["ask", "Reply {\"ok\": true}"])
        .output()
        .unwrap();
    assert!(
        ask.status.success(),
        "{}",
        String::from_utf8_lossy(&ask.stderr)
    );
    assert_escapee_gone(&w.path("rec/escapee.pid"), NO_HANG);
    let pwd = w.read("rec/debug.pwd");
    assert!(
        pwd.trim()
            .starts_with(w.state().join("tmp").to_str().unwrap())
            || pwd.trim().starts_with(w.tmp.to_str().unwrap()),
        "a fresh runner folder, not the judge's cwd: {pwd}"
    );
    assert_ne!(
        pwd.trim(),
        std::env::current_dir().unwrap().to_str().unwrap()
    );
    assert_eq!(w.read("rec/debug.git").trim(), "/dev/null");
    let catalogs = w.read("rec/catalogs");
    assert!(
        catalogs.contains(w.state().join("codex/catalog-").to_str().unwrap()),
        "{catalogs}"
    );
    // A `run` beside it uses the kept copy: no second read.
    w.job("r", &json!({"prompt": "q", "hit_if_all_true": ["ok"]}));
    let run = command(&w, Some(&table), &mark)
        .arg("run")
        .arg(w.jobs().join("r.json"))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(w.verdict("r")["outcome"], "hit", "{}", w.log());
    assert_eq!(w.read("rec/debug.count").lines().count(), 1);
    assert_eq!(w.read("rec/catalogs").lines().count(), 2);
}
