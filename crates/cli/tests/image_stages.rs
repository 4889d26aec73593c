//! The container image's build stages, without a Docker daemon: each stage's context is laid
//! out exactly as the Dockerfile's `COPY` lines say (from the repository, honouring
//! `.dockerignore`), and that stage's build runs there, so a change that breaks the image
//! (a workspace member the build stage does not copy, say) fails here.
//!
//! - `build`: its `cargo build … -p tickwire` command, offline and in the debug profile (the
//!   release profile changes codegen, not what must be present), with this repository's
//!   target directory so the dependencies CI built already are reused (the workspace's own
//!   crates, at another path, build anew beside the repository's);
//! - `web`: its `RUN` line as written (`npm ci` from the registry, then the vite build).
//!
//! Then the final stage's `COPY --from` sources must exist in the stages that made them.
//!
//! Ignored by `cargo test`, since it builds: `make test-image` (part of `make test`) runs it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One `FROM` of the Dockerfile and what it does.
#[derive(Debug, Default)]
struct Stage {
    name: String,
    /// `(sources, destination)` of each `COPY` from the build context (absolute inside the
    /// image).
    copies: Vec<(Vec<String>, String)>,
    /// `(working directory, command)` of each `RUN`.
    runs: Vec<(String, String)>,
    /// `(stage, path)` of each `COPY --from`.
    copies_from: Vec<(String, String)>,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Dockerfile's instructions, continuation lines joined and comments dropped.
fn instructions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

fn resolve(workdir: &str, path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!(
            "{}/{}",
            workdir.trim_end_matches('/'),
            path.trim_start_matches("./")
        )
    }
}

fn stages(dockerfile: &str) -> Vec<Stage> {
    let mut stages: Vec<Stage> = Vec::new();
    let mut workdir = String::from("/");
    for instruction in instructions(dockerfile) {
        let (keyword, rest) = instruction
            .split_once(char::is_whitespace)
            .unwrap_or((&instruction, ""));
        let words: Vec<&str> = rest.split_whitespace().collect();
        match keyword.to_ascii_uppercase().as_str() {
            "FROM" => {
                workdir = "/".into();
                let name = match words.as_slice() {
                    [_, as_, name] if as_.eq_ignore_ascii_case("as") => name.to_string(),
                    _ => String::new(),
                };
                stages.push(Stage {
                    name,
                    ..Stage::default()
                });
            }
            "WORKDIR" => workdir = resolve(&workdir, words[0]),
            "COPY" => {
                let stage = stages.last_mut().expect("COPY after FROM");
                let from = words.iter().find_map(|word| word.strip_prefix("--from="));
                let paths: Vec<&str> = words
                    .iter()
                    .filter(|word| !word.starts_with("--"))
                    .copied()
                    .collect();
                let (destination, sources) = paths.split_last().expect("COPY has a destination");
                match from {
                    Some(from) => stage
                        .copies_from
                        .extend(sources.iter().map(|s| (from.to_string(), s.to_string()))),
                    None => stage.copies.push((
                        sources.iter().map(|s| s.to_string()).collect(),
                        resolve(&workdir, destination),
                    )),
                }
            }
            "RUN" => {
                let stage = stages.last_mut().expect("RUN after FROM");
                stage.runs.push((workdir.clone(), rest.trim().to_string()));
            }
            _ => {}
        }
    }
    stages
}

/// `.dockerignore`'s patterns: `*` within a segment, `**` for any number of segments,
/// anchored at the context's root; a trailing `/` is dropped (a directory and what is in it).
struct Ignore(Vec<Vec<String>>);

impl Ignore {
    fn read(path: &Path) -> Self {
        let text = fs::read_to_string(path).unwrap_or_default();
        let patterns = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .map(|line| {
                assert!(!line.starts_with('!'), "exceptions are not handled: {line}");
                line.trim_matches('/')
                    .split('/')
                    .map(String::from)
                    .collect()
            })
            .collect();
        Self(patterns)
    }

    /// Whether `path` (relative, `/`-separated), or a directory above it, is ignored.
    fn ignores(&self, path: &str) -> bool {
        let segments: Vec<&str> = path.split('/').collect();
        (1..=segments.len()).any(|len| {
            self.0
                .iter()
                .any(|pattern| segments_match(pattern, &segments[..len]))
        })
    }
}

fn segments_match(pattern: &[String], path: &[&str]) -> bool {
    match (pattern.first(), path.first()) {
        (None, None) => true,
        (Some(first), _) if first == "**" => {
            segments_match(&pattern[1..], path)
                || (!path.is_empty() && segments_match(pattern, &path[1..]))
        }
        (Some(first), Some(segment)) => {
            glob_match(first.as_bytes(), segment.as_bytes())
                && segments_match(&pattern[1..], &path[1..])
        }
        _ => false,
    }
}

fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| glob_match(rest, &text[skip..])),
        Some((c, rest)) => text.first() == Some(c) && glob_match(rest, &text[1..]),
    }
}

/// Copies `from` (relative to the context) to `to` as `COPY` does: a directory's contents
/// into `to`, a file to `to` (or into it, when `to` ends in `/`).
fn copy_in(context: &Path, ignore: &Ignore, from: &str, to: &Path, to_is_dir: bool) {
    let relative = from.trim_start_matches("./").trim_end_matches('/');
    let source = context.join(relative);
    if source.is_dir() {
        copy_tree(context, ignore, relative, to);
    } else {
        assert!(source.is_file(), "COPY {from}: not in the context");
        let target = if to_is_dir {
            to.join(source.file_name().unwrap())
        } else {
            to.to_path_buf()
        };
        fs::create_dir_all(target.parent().unwrap()).unwrap();
        fs::copy(&source, &target).unwrap();
    }
}

fn copy_tree(context: &Path, ignore: &Ignore, relative: &str, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(context.join(relative)).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let child = format!("{relative}/{name}");
        if ignore.ignores(&child) {
            continue;
        }
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(context, ignore, &child, &to.join(&name));
        } else if kind.is_file() {
            fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

/// A stage's image filesystem, laid out in `root` from its `COPY` lines.
fn lay_out(stage: &Stage, root: &Path) {
    let context = repo();
    let ignore = Ignore::read(&context.join(".dockerignore"));
    for (sources, destination) in &stage.copies {
        let to = root.join(destination.trim_start_matches('/'));
        let to_is_dir = destination.ends_with('/') || sources.len() > 1;
        for source in sources {
            copy_in(&context, &ignore, source, &to, to_is_dir);
        }
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = repo().join("target/image-stages").join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn stage<'a>(stages: &'a [Stage], name: &str) -> &'a Stage {
    stages
        .iter()
        .find(|stage| stage.name == name)
        .unwrap_or_else(|| panic!("no stage {name:?} in the Dockerfile"))
}

fn run(command: &mut Command, what: &str) {
    let status = command
        .status()
        .unwrap_or_else(|error| panic!("{what}: {error}"));
    assert!(status.success(), "{what} failed: {status}");
}

#[test]
fn the_dockerfile_is_read_as_docker_reads_it() {
    let dockerfile = "FROM node AS web\nWORKDIR /src/a\nCOPY x/ ./\nRUN cd web && \\\n    make\n\
                      FROM rust AS build\nWORKDIR /src\nCOPY A B ./\nFROM slim\n\
                      COPY --from=build /bin/t /usr/t\n";
    let stages = stages(dockerfile);
    assert_eq!(stages.len(), 3);
    assert_eq!(
        stages[0].copies,
        [(vec!["x/".to_string()], "/src/a/".to_string())]
    );
    assert_eq!(
        stages[0].runs,
        [("/src/a".to_string(), "cd web &&  make".to_string())]
    );
    assert_eq!(
        stages[1].copies,
        [(vec!["A".to_string(), "B".to_string()], "/src/".to_string())]
    );
    assert_eq!(
        stages[2].copies_from,
        [("build".to_string(), "/bin/t".to_string())]
    );

    let ignore = Ignore(vec![
        vec!["target".into()],
        vec!["**".into(), "node_modules".into()],
        vec!["*.db".into()],
    ]);
    assert!(ignore.ignores("target/debug/x"));
    assert!(ignore.ignores("clients/ts/node_modules/vite/x.js"));
    assert!(ignore.ignores("node_modules"));
    assert!(ignore.ignores("tickwire.db"));
    assert!(
        !ignore.ignores("crates/store/tickwire.db"),
        "anchored at the root"
    );
    assert!(!ignore.ignores("crates/target-ish"));
}

#[test]
#[ignore = "builds the image's stages: make test-image"]
fn every_build_stage_of_the_image_builds_from_exactly_what_it_copies() {
    let dockerfile = fs::read_to_string(repo().join("Dockerfile")).unwrap();
    let stages = stages(&dockerfile);

    let build = stage(&stages, "build");
    let build_root = scratch("build");
    lay_out(build, &build_root);
    let (workdir, command) = build
        .runs
        .iter()
        .find(|(_, command)| command.contains("cargo build"))
        .expect("the build stage runs cargo build");
    let cargo_build = command.split("&&").next().unwrap();
    let mut args: Vec<&str> = cargo_build.split_whitespace().skip(1).collect();
    args.retain(|arg| *arg != "--release");
    args.push("--offline");
    args.push("--message-format=json-render-diagnostics");
    let source = build_root.join(workdir.trim_start_matches('/'));
    let what = format!("the build stage's `{cargo_build}` in {}", source.display());
    let output = Command::new(env!("CARGO"))
        .args(&args)
        .current_dir(&source)
        .env("CARGO_TARGET_DIR", repo().join("target"))
        .output()
        .unwrap_or_else(|error| panic!("{what}: {error}"));
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    // The binary this build made (in the shared target directory, beside the repository's).
    let binary = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["target"]["name"] == "tickwire")
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .expect("the build made the tickwire binary");

    let web = stage(&stages, "web");
    let web_root = scratch("web");
    lay_out(web, &web_root);
    for (workdir, command) in &web.runs {
        let dir = web_root.join(workdir.trim_start_matches('/'));
        run(
            Command::new("sh").arg("-c").arg(command).current_dir(&dir),
            &format!("the web stage's `{command}` in {}", dir.display()),
        );
    }

    let final_stage = stages.last().unwrap();
    for (from, path) in &final_stage.copies_from {
        let made = match from.as_str() {
            // The build stage copies its binary to /tickwire; this build left it in the
            // target directory's debug profile.
            "build" if path == "/tickwire" => binary.clone(),
            "web" => web_root.join(path.trim_start_matches('/')),
            other => panic!("a COPY --from={other} this test does not know"),
        };
        assert!(
            made.exists(),
            "COPY --from={from} {path}: {} is missing",
            made.display()
        );
    }
    let _ = fs::remove_dir_all(&build_root);
    let _ = fs::remove_dir_all(&web_root);
}
