//! Where a running llm-judge lives, judged from its path alone (docs/install.md,
//! "Where the binary lives"). `hooks install` and `service install` write this binary's
//! absolute path into files that outlive the command. From `uv tool install`, `pipx
//! install`, `pip` or `npm i -g` that path survives upgrades; from `uvx`, `pipx run` or
//! `npx` it is a cache folder the tool clears, and the hooks or the service would then
//! run nothing: refused, naming the install that stays. Under a temporary folder (a
//! test's venv, an unpacked download) it is only warned about. Pure.

use std::path::{Component, Path, PathBuf};

/// The Python package (PyPI): `uv tool install`, `pipx install`, `pip install`.
pub const PYPI_PACKAGE: &str = "llm-judge";
/// The npm launcher package (its platform packages are `<it>-<os>-<cpu>`); the same
/// name as `packaging/npm/llm-judge/package.json`'s (a test compares them).
pub const NPM_PACKAGE: &str = "@llm-judge/llm-judge";

/// Where a binary lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// uv's cache, where `uvx` (`uv tool run`) unpacks and runs a tool: an
    /// `archive-vN`, `environments-vN` or `builds-vN` bucket.
    UvxCache,
    /// pipx's cache of `pipx run` environments (`.cache/pipx/<hash>`, or
    /// `<PIPX_HOME>/.cache/<hash>`; `Library/Caches/pipx` on macOS).
    PipxRunCache,
    /// npm's `_npx` cache of `npx` (`npm exec`), or another npm package runner's
    /// (`pnpm dlx`, `bunx`).
    NpxCache,
    /// Under this temporary folder.
    Temporary(PathBuf),
    /// Anywhere else: assumed to stay.
    Persistent,
}

/// What an install command does about a place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advice {
    /// Go on.
    Fine,
    /// Go on, saying this.
    Warn(String),
    /// Do nothing, saying this.
    Refuse(String),
}

/// Where `bin` (absolute) lives; `temp` are the temporary folders (`$TMPDIR`; `/tmp`,
/// `/var/tmp`, `/dev/shm` and macOS's `/var/folders` are always ones). A cache wins over
/// a temporary folder: `uvx` with its cache in /tmp is still `uvx`.
pub fn classify(bin: &Path, temp: &[PathBuf]) -> Place {
    let names: Vec<&str> = bin
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => name.to_str(),
            _ => None,
        })
        .collect();
    let folders = &names[..names.len().saturating_sub(1)];
    let bucket = |name: &str, kind: &str| {
        name.strip_prefix(kind)
            .and_then(|n| n.strip_prefix("-v"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    if folders.iter().any(|n| {
        ["archive", "environments", "builds"]
            .iter()
            .any(|k| bucket(n, k))
    }) {
        return Place::UvxCache;
    }
    let pair = |a: &str, b: &str| folders.windows(2).any(|w| w[0] == a && w[1] == b);
    if pair(".cache", "pipx") || pair("pipx", ".cache") || pair("Caches", "pipx") {
        return Place::PipxRunCache;
    }
    if folders.contains(&"_npx")
        || pair("pnpm", "dlx")
        || folders.iter().any(|n| n.starts_with("bunx-"))
    {
        return Place::NpxCache;
    }
    let fixed = [
        "/tmp",
        "/var/tmp",
        "/dev/shm",
        "/var/folders",
        "/private/var/folders",
        "/private/tmp",
    ];
    temp.iter()
        .cloned()
        .chain(fixed.iter().map(PathBuf::from))
        .filter(|root| root.is_absolute() && root.parent().is_some())
        .find(|root| bin.starts_with(root))
        .map_or(Place::Persistent, Place::Temporary)
}

/// What to do about writing `bin`, living at `place`, into `what` ("the hooks", "the
/// service"): each message names the install that stays.
pub fn advice(place: &Place, bin: &Path, what: &str) -> Advice {
    let bin = bin.display();
    let cache = |runner: &str, install: &str| {
        Advice::Refuse(format!(
            "this llm-judge runs from {runner}'s cache ({bin}), which is cleared and replaced: \
             {what} would name a program that disappears. Install llm-judge where it stays \
             (`{install}`), then run this again with that llm-judge"
        ))
    };
    let uv = format!("uv tool install {PYPI_PACKAGE}");
    match place {
        Place::UvxCache => cache("uvx", &uv),
        Place::PipxRunCache => cache("pipx run", &format!("pipx install {PYPI_PACKAGE}")),
        Place::NpxCache => cache("npx", &format!("npm i -g {NPM_PACKAGE}")),
        Place::Temporary(root) => Advice::Warn(format!(
            "this llm-judge ({bin}) is under the temporary folder {}: {what} stop working \
             when it is removed; for good, install llm-judge where it stays (`{uv}`, `pipx \
             install {PYPI_PACKAGE}` or `npm i -g {NPM_PACKAGE}`) and run this again with it",
            root.display()
        )),
        Place::Persistent => Advice::Fine,
    }
}

/// The worse advice of two (a refusal over a warning over nothing): for a path and the
/// file it really is, when one is a symlink into a cache.
pub fn worse(a: Advice, b: Advice) -> Advice {
    let rank = |x: &Advice| match x {
        Advice::Fine => 0,
        Advice::Warn(_) => 1,
        Advice::Refuse(_) => 2,
    };
    if rank(&b) > rank(&a) { b } else { a }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(path: &str) -> Place {
        classify(Path::new(path), &[PathBuf::from("/home/u/tmp")])
    }

    #[test]
    fn package_runner_caches_are_told_apart_from_installs_that_stay() {
        for uvx in [
            "/home/u/.cache/uv/archive-v0/Wsi43eqZKIryTOAk/bin/llm-judge",
            "/tmp/x/uv-cache/archive-v0/abc/bin/llm-judge",
            "/Users/u/.cache/uv/environments-v2/llm-judge-1a2b/bin/llm-judge",
            "/c/builds-v12/x/llm-judge",
        ] {
            assert_eq!(place(uvx), Place::UvxCache, "{uvx}");
        }
        for pipx_run in [
            "/home/u/.cache/pipx/6aef6f038ccba3e/bin/llm-judge",
            "/home/u/.local/pipx/.cache/6aef6f0/bin/llm-judge",
            "/Users/u/Library/Caches/pipx/6aef6f0/bin/llm-judge",
        ] {
            assert_eq!(place(pipx_run), Place::PipxRunCache, "{pipx_run}");
        }
        for npx in [
            "/home/u/.npm/_npx/1415fee72ff6294b/node_modules/@llm-judge/llm-judge-linux-x64/bin/llm-judge",
            "/tmp/npm-cache/_npx/1415/node_modules/@llm-judge/llm-judge-linux-x64/bin/llm-judge",
            "/home/u/.cache/pnpm/dlx/abc/node_modules/.pnpm/x/bin/llm-judge",
            "/tmp/bunx-1000-@llm-judge/llm-judge@0.1.0/node_modules/x/bin/llm-judge",
        ] {
            assert_eq!(place(npx), Place::NpxCache, "{npx}");
        }
        for stays in [
            "/home/u/.local/share/uv/tools/llm-judge/bin/llm-judge",
            "/home/u/.local/bin/llm-judge",
            "/home/u/.local/share/pipx/venvs/llm-judge/bin/llm-judge",
            "/usr/lib/node_modules/@llm-judge/llm-judge-linux-x64/bin/llm-judge",
            "/home/u/.cargo/bin/llm-judge",
            "/home/u/src/venv/bin/llm-judge",
            // Names alike, but not uv's buckets, pipx's cache or npm's.
            "/home/u/archive-v1.2/bin/llm-judge",
            "/home/u/archive-v/bin/llm-judge",
            "/home/u/pipx/bin/llm-judge",
            "/home/u/npx/bin/llm-judge",
            "/home/u/tmpfiles/llm-judge",
            "/tmpx/llm-judge",
            // Only folders count: a program named like a bucket is not in one.
            "/home/u/bin/archive-v0",
        ] {
            assert_eq!(place(stays), Place::Persistent, "{stays}");
        }
    }

    #[test]
    fn temporary_folders_are_the_given_ones_and_the_usual_ones() {
        let temp = |root: &str| Place::Temporary(PathBuf::from(root));
        assert_eq!(place("/home/u/tmp/venv/bin/llm-judge"), temp("/home/u/tmp"));
        assert_eq!(place("/tmp/tmp.x/venv/bin/llm-judge"), temp("/tmp"));
        assert_eq!(place("/var/tmp/llm-judge"), temp("/var/tmp"));
        assert_eq!(
            place("/private/var/folders/xy/T/venv/bin/llm-judge"),
            temp("/private/var/folders")
        );
        // A relative or root TMPDIR names no temporary folder.
        let odd = [PathBuf::from("tmp"), PathBuf::from("/")];
        assert_eq!(
            classify(Path::new("/usr/bin/llm-judge"), &odd),
            Place::Persistent
        );
    }

    #[test]
    fn caches_are_refused_naming_the_install_that_stays_and_temp_is_warned_about() {
        let bin = Path::new("/b/llm-judge");
        let refusal = |p: Place| match advice(&p, bin, "the hooks") {
            Advice::Refuse(text) => text,
            other => panic!("{other:?}"),
        };
        let uvx = refusal(Place::UvxCache);
        assert!(uvx.contains("uvx's cache (/b/llm-judge)"), "{uvx}");
        assert!(uvx.contains("`uv tool install llm-judge`"), "{uvx}");
        assert!(uvx.contains("the hooks would name"), "{uvx}");
        assert!(refusal(Place::PipxRunCache).contains("`pipx install llm-judge`"));
        assert!(refusal(Place::NpxCache).contains("`npm i -g @llm-judge/llm-judge`"));
        let Advice::Warn(warning) =
            advice(&Place::Temporary(PathBuf::from("/tmp")), bin, "the service")
        else {
            panic!()
        };
        assert!(
            warning.contains("temporary folder /tmp: the service stop"),
            "{warning}"
        );
        assert_eq!(advice(&Place::Persistent, bin, "the hooks"), Advice::Fine);
        let warn = Advice::Warn("w".into());
        let refuse = Advice::Refuse("r".into());
        assert_eq!(worse(warn.clone(), refuse.clone()), refuse);
        assert_eq!(worse(refuse.clone(), Advice::Fine), refuse);
        assert_eq!(worse(Advice::Fine, warn.clone()), warn);
    }

    /// The npm name said to users is the launcher package's.
    #[test]
    fn the_npm_name_is_the_launcher_packages() {
        let manifest =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/npm/llm-judge/package.json");
        let text = std::fs::read_to_string(&manifest).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["name"], NPM_PACKAGE);
        let pyproject =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("pyproject.toml"))
                .unwrap();
        assert!(pyproject.contains(&format!("name = \"{PYPI_PACKAGE}\"")));
    }
}
