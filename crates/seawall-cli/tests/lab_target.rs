//! `seawall lab --target` as a user runs it: on a stack started by `--config` commands, with a
//! fault through a named proxy; bad input refused with the reason; and every process a
//! configuration started stopped when the lab is interrupted (SIGINT) or killed (SIGKILL).
//!
//! The user's stack here is a `seawall proxy --http` (no retries: one dependency request per
//! edge request) in front of the lab's proxy, in front of a small HTTP server of the test; the
//! third-party retriers (HAProxy, nginx) are in `lab_target_stack.rs`.

mod lab_support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lab_support::{Guard, alive, free_port, http_server, lab_on, read_json, seawall, wait_for};

/// `--config NAME='…'`: a `seawall proxy` on `edge` forwarding to `upstream`, after a `sleep`
/// left in the background; the shell's and the sleep's pids go to `pids`, and which `seawall`
/// the command's PATH finds to `pids.which`. It calls `seawall` by name, as a user's command
/// would: the lab puts its own binary first on the command's PATH.
fn stack_command(edge: u16, upstream: u16, pids: &std::path::Path) -> String {
    format!(
        "sleep 300 & echo $$ $! > {pids}.tmp && mv {pids}.tmp {pids}; \
         command -v seawall > {pids}.which; exec seawall proxy --http \
         --listen 127.0.0.1:{edge} --upstream 127.0.0.1:{upstream}",
        pids = pids.display(),
    )
}

#[test]
fn runs_each_config_and_reports_the_fault_through_the_named_proxy() {
    let (dep, _server) = http_server();
    let (edge, lab_proxy) = (free_port(), free_port());
    let out = tempdir("report");
    let pids = out.join("pids");
    let run = lab_on(edge, "/checkout", lab_proxy, dep)
        .args(["--fault", "dep:fail:2@2", "--duration", "10", "--rate", "40"])
        .arg("--config")
        .arg(format!("direct={}", stack_command(edge, lab_proxy, &pids)))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    let results = read_json(&out.join("results.json"));
    assert_eq!(results["scenario"], "lab-target");
    assert_eq!(results["tiers"], serde_json::json!(["edge", "dep"]));
    let r = &results["runs"][0];
    assert_eq!(r["policy"], "direct");
    // The fault (2 s of 503 at the lab's proxy) is seen at the edge: nothing good during it,
    // all good before and after (the stack has no retries to keep it down).
    assert!(r["goodput_before"].as_f64().unwrap() >= 0.9, "{r}");
    assert!(r["goodput_during"].as_f64().unwrap() <= 0.1, "{r}");
    assert!(r["goodput_after"].as_f64().unwrap() >= 0.9, "{r}");
    assert_eq!(r["verdict"]["kind"], "recovered");
    let fig = read_json(&out.join("target.json"));
    let d = &fig[0]["dependencies"][0];
    assert_eq!(d["name"], "dep");
    for k in ["per_edge_before", "per_edge_during", "per_edge_after"] {
        let v = d[k].as_f64().unwrap();
        assert!((0.85..=1.15).contains(&v), "{k} = {v}: one dependency request per edge request");
    }
    assert!(d["faulted"].as_u64().unwrap() >= 60, "{d}");
    assert!(std::fs::read_to_string(out.join("report.html")).unwrap().contains("direct"));
    // `seawall` on the command's PATH is the binary that ran the lab. Mutation checked: without
    // `path_with_own_binary` the command finds no `seawall` and the run fails.
    let which = std::fs::read_to_string(pids.with_extension("which")).unwrap();
    assert_eq!(which.trim(), env!("CARGO_BIN_EXE_seawall"));
    // The configuration's processes are gone once the lab has returned.
    let pids = read_pids(&pids);
    assert!(pids.iter().all(|p| !alive(*p)), "{pids:?} survived the lab");
}

#[test]
fn bad_input_and_a_failing_command_are_clear_errors() {
    let (dep, _server) = http_server();
    let p = free_port();
    let proxy = format!("dep=127.0.0.1:{p},127.0.0.1:{dep}");
    let cases: [(&[&str], &str); 5] = [
        (&["--target", "http://10.1.2.3/x"], "loopback"),
        (
            &["--target", "http://127.0.0.1:1/", "--proxy", "db=127.0.0.1:7000,10.0.0.1:5432"],
            "loopback",
        ),
        (&["--target", "http://127.0.0.1:1/", "--fault", "db:fail:3"], "no --proxy named \"db\""),
        (
            &[
                "--target",
                "http://127.0.0.1:1/",
                "--proxy",
                &proxy,
                "--config",
                "a=true",
                "--config",
                "a=true",
            ],
            "twice",
        ),
        (&["--proxy", &proxy], "--proxy needs --target"),
    ];
    for (args, why) in cases {
        let out = seawall().arg("lab").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {why:?} not in {err}");
    }
    // A lab file is parsed as strictly as the flags.
    let file = tempdir("file").join("lab.json");
    std::fs::write(&file, r#"{"target": "http://127.0.0.1:1/", "retries": 3}"#).unwrap();
    let out = seawall().args(["lab", "--file"]).arg(&file).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--file") && err.contains("unknown field `retries`"), "{err}");
    // A command that exits before the target answers: named, with its log.
    let out_dir = tempdir("fails");
    let edge = free_port();
    let out = seawall()
        .args(["lab", "--target", &format!("http://127.0.0.1:{edge}/"), "--proxy", &proxy])
        .args(["--config", "broken=echo cannot start >&2; exit 3", "--duration", "2"])
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("config broken") && err.contains("exited"), "{err}");
    let log = std::fs::read_to_string(out_dir.join("broken.log")).unwrap();
    assert!(log.contains("cannot start"), "{log}");
    // Something already listening at the target when a command is to start it.
    let (busy, _busy_server) = http_server();
    let out = seawall()
        .args(["lab", "--target", &format!("http://127.0.0.1:{busy}/"), "--proxy", &proxy])
        .args(["--config", "x=sleep 1", "--duration", "2"])
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("accepts connections before its command started"), "{err}");
}

fn read_pids(path: &std::path::Path) -> Vec<u32> {
    std::fs::read_to_string(path).unwrap().split_whitespace().map(|p| p.parse().unwrap()).collect()
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "seawall-lab-target-{name}-{}-{:?}",
        std::process::id(),
        Instant::now()
    ));
    let d = std::path::PathBuf::from(d.to_string_lossy().replace([' ', '{', '}', ':', ','], ""));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Starts a 30 s lab, waits until its configuration is up and under load, sends `signal` to
/// the lab, and returns the configuration's pids and the lab's exit status.
fn lab_then(signal: &str) -> (Vec<u32>, std::process::ExitStatus) {
    let (dep, _server) = http_server();
    let (edge, lab_proxy) = (free_port(), free_port());
    let out = tempdir(signal);
    let pids = out.join("pids");
    let child = lab_on(edge, "/", lab_proxy, dep)
        .args(["--fault", "dep:fail:5", "--duration", "30", "--rate", "20"])
        .arg("--config")
        .arg(format!("s={}", stack_command(edge, lab_proxy, &pids)))
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lab = Guard(child);
    assert!(wait_for(Duration::from_secs(20), || pids.exists()), "the config never started");
    assert!(
        wait_for(Duration::from_secs(20), || std::net::TcpStream::connect(("127.0.0.1", edge))
            .is_ok()),
        "the config's proxy never listened"
    );
    std::thread::sleep(Duration::from_secs(1));
    let pids = read_pids(&pids);
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?} should be running mid-run");
    let lab_pid = lab.0.id().to_string();
    let sent = Command::new("kill").args([signal, &lab_pid]).status().unwrap();
    assert!(sent.success());
    let t = Instant::now();
    let status = loop {
        if let Some(s) = lab.0.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(15), "the lab did not exit on {signal}");
        std::thread::sleep(Duration::from_millis(50));
    };
    (pids, status)
}

#[test]
fn sigint_stops_every_process_of_the_config() {
    let (pids, status) = lab_then("-INT");
    assert_eq!(status.code(), Some(130), "interrupted: exit 130");
    // The lab stopped the group before it exited.
    assert!(pids.iter().all(|p| !alive(*p)), "{pids:?} survived SIGINT of the lab");
}

#[test]
fn sigkill_of_the_lab_still_stops_every_process_of_the_config() {
    let (pids, _) = lab_then("-KILL");
    // The lab could do nothing; its reaper sees its stdin close and stops the group.
    assert!(
        wait_for(Duration::from_secs(10), || pids.iter().all(|p| !alive(*p))),
        "{pids:?} survived SIGKILL of the lab"
    );
}

/// A configuration whose stack answers at the target but never serves (the edge is up, what is
/// behind it is not: the stack README's example run where the started command's own backends
/// failed) is not judged — never "recovered as soon as the fault ended" with 0 % goodput — and
/// the lab exits 1. Turns red if the judgement takes a 0 % level for a level (it then reads
/// recovered, exit 0).
#[test]
fn a_stack_that_never_served_is_not_judged_and_fails_the_run() {
    let (edge, lab_proxy, dead) = (free_port(), free_port(), free_port());
    let out = tempdir("never-served");
    let run = lab_on(edge, "/", lab_proxy, dead)
        .args(["--fault", "dep:fail:2@3", "--duration", "10", "--rate", "20"])
        .arg("--config")
        .arg(format!(
            "dead={} proxy --http --listen 127.0.0.1:{edge} --upstream 127.0.0.1:{dead}",
            env!("CARGO_BIN_EXE_seawall")
        ))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let (stdout, err) =
        (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert_eq!(run.status.code(), Some(1), "{err}");
    assert!(err.contains("not judged: dead did not serve before the fault"), "{err}");
    assert!(stdout.contains("dead: not judged: the stack never served"), "{stdout}");
    let results = read_json(&out.join("results.json"));
    let v = &results["runs"][0]["verdict"];
    assert_eq!(
        (v["kind"].as_str(), v["because"]["reason"].as_str()),
        (Some("not_judged"), Some("unhealthy_before")),
        "{v}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(!html.contains("✓"), "no good news on a stack that never served");
}

#[test]
fn a_run_the_generator_could_not_send_is_marked_a_lower_bound_in_words() {
    let (dep, _server) = http_server();
    let (edge, lab_proxy) = (free_port(), free_port());
    let out = tempdir("saturated");
    let pids = out.join("pids");
    // One request in flight at most, each held 300 ms by the fault: most of 40 rps cannot be
    // sent, and the lab must say that its figures are lower bounds.
    let run = lab_on(edge, "/", lab_proxy, dep)
        .args(["--fault", "dep:slow:3@0,latency=300", "--duration", "3", "--rate", "40"])
        .args(["--max-in-flight", "1"])
        .arg("--config")
        .arg(format!("tiny={}", stack_command(edge, lab_proxy, &pids)))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let fig = read_json(&out.join("target.json"));
    assert_eq!(fig[0]["lower_bound"], true, "{fig}");
    assert!(fig[0]["saturation"]["dropped"].as_u64().unwrap() >= 60, "{fig}");
    let results = read_json(&out.join("results.json"));
    let words = results["description"].as_str().unwrap();
    assert!(
        words.contains("tiny: capped by this machine") && words.contains("lower bounds"),
        "{words}"
    );
    assert!(String::from_utf8_lossy(&run.stdout).contains("≥"), "the table marks it");
}
