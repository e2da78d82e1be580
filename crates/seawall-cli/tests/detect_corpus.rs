//! The labelled corpus: runs that real programs made (grpcio clients and servers, scraped by a
//! real Prometheus), with every answer `seawall detect --prometheus` got recorded beside the
//! labels the run's schedule implies (`crates/seawall-detect/tests/corpus/*.json`, made by
//! `make.py` there, which records the versions it ran). Each file is replayed through `detect`
//! with default settings — a local server answers exactly what Prometheus answered — and the
//! verdict of every labelled interval is checked against its label. The lab's runs (its own
//! baseline and seawall stacks, and the HAProxy + nginx stack through `lab --target`) are
//! replay files instead: the results.json the lab wrote, read by `detect --replay`.
//!
//! Must show: at least 95 % of labelled intervals right (and 90 % of each run's); no
//! `retry_storm` or `metastable` in a run without a fault; no `traffic_spike` in a run whose
//! edge never moved; a storm called within two scrape intervals and one rate window of the
//! attempts' jump (three intervals in a replay).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../seawall-detect/tests/corpus")
}

/// `%XX` and `+` decoded (the query string of a GET).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Serves the recorded answers: the key is the path and the `query` parameter.
fn serve(answers: HashMap<String, (u16, String)>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let answers = Arc::new(answers);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let answers = answers.clone();
            std::thread::spawn(move || answer(stream, &answers));
        }
    });
    addr
}

fn answer(mut stream: TcpStream, answers: &HashMap<String, (u16, String)>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    let _ = reader.read_line(&mut line);
    let mut header = String::new();
    while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
        header.clear();
    }
    let target = line.split_whitespace().nth(1).unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let q =
        query.split('&').find_map(|kv| kv.strip_prefix("query=")).map(decode).unwrap_or_default();
    let (status, body) = answers.get(&format!("{path}\n{q}")).cloned().unwrap_or_else(|| {
        (404, format!("not recorded: {path} {q:?} (re-run make.py: the queries changed)"))
    });
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

#[derive(Default, Debug)]
struct Tally {
    labelled: usize,
    right: usize,
}

#[test]
fn every_recorded_run_is_judged_right_with_default_settings() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 11, "the corpus is missing: {files:?}");
    let mut total = Tally::default();
    let mut per_file = Vec::new();
    let mut report = String::new();
    for file in &files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let name = doc["name"].as_str().unwrap().to_string();
        let replay = doc["source"] == "replay";
        let mut args = vec!["detect".to_string()];
        if replay {
            let path = std::env::temp_dir()
                .join(format!("seawall-corpus-{}-{name}.json", std::process::id()));
            std::fs::write(&path, doc["replay"].to_string()).unwrap();
            args.extend(["--replay".into(), path.display().to_string()]);
        } else {
            let answers: HashMap<String, (u16, String)> = doc["answers"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| {
                    let status = v["status"].as_u64().unwrap() as u16;
                    (k.clone(), (status, v["body"].as_str().unwrap().to_string()))
                })
                .collect();
            let addr = serve(answers);
            args.extend(["--prometheus".into(), format!("http://{addr}")]);
        }
        args.extend(
            doc["detect_args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()),
        );
        let out = Command::new(env!("CARGO_BIN_EXE_seawall")).args(&args).output().unwrap();
        if replay {
            let _ = std::fs::remove_file(&args[2]);
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let verdicts: HashMap<i64, String> = stdout
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (
                    v["t"].as_f64().unwrap().round() as i64,
                    v["verdict"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let mut tally = Tally::default();
        let mut wrong = Vec::new();
        for label in doc["labels"].as_array().unwrap() {
            let expect: Vec<&str> =
                label["expect"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
            for t in label["from_s"].as_i64().unwrap()..label["to_s"].as_i64().unwrap() {
                tally.labelled += 1;
                let got = verdicts.get(&t).map_or("(none)", String::as_str);
                if expect.contains(&got) {
                    tally.right += 1;
                } else {
                    wrong.push(format!("t={t} {got} (want {})", expect.join("|")));
                }
            }
        }
        let sc = &doc["scenario"];
        let faults = sc["faults"].as_array().unwrap();
        let steps = sc["steps"].as_array().unwrap();
        let count = |kind: &str| verdicts.values().filter(|k| *k == kind).count();
        if faults.is_empty() {
            let storms = count("retry_storm") + count("metastable");
            assert_eq!(storms, 0, "{name}: a storm without a fault: {stdout}");
        }
        if steps.is_empty() {
            assert_eq!(count("traffic_spike"), 0, "{name}: a spike on a flat edge: {stdout}");
        }
        if let (Some(f), false) = (faults.first(), sc["throttle"].as_bool().unwrap()) {
            let f0 = f[0].as_i64().unwrap();
            let first = (f0..f0 + 60).find(|t| verdicts.get(t).is_some_and(|k| k == "retry_storm"));
            let first = first.unwrap_or_else(|| panic!("{name}: no storm called: {stdout}"));
            // Through Prometheus: two scrapes and the 4-scrape rate window. A replay has one
            // point a second and judges attempts per call over three of them.
            let bound = match doc["scrape_interval_s"].as_i64() {
                Some(scrape) => 2 * scrape + 4 * scrape,
                None => 3,
            };
            assert!(first - f0 <= bound, "{name}: storm called {} s after the jump", first - f0);
            report.push_str(&format!("{name}: storm called {} s after the fault\n", first - f0));
        }
        let mut ts: Vec<_> = verdicts.iter().collect();
        ts.sort();
        let mut changes = Vec::new();
        for (t, k) in ts {
            if changes.last().is_none_or(|(_, last): &(i64, &String)| *last != k) {
                changes.push((*t, k));
            }
        }
        let changes: Vec<String> = changes.iter().map(|(t, k)| format!("{t}:{k}")).collect();
        report.push_str(&format!("{name}: {}\n", changes.join(" ")));
        report.push_str(&format!(
            "{name}: {}/{} labelled intervals right ({:.1} %){}\n",
            tally.right,
            tally.labelled,
            100.0 * tally.right as f64 / tally.labelled.max(1) as f64,
            if wrong.is_empty() { String::new() } else { format!("; wrong: {}", wrong.join(", ")) }
        ));
        // Each run on its own too: a verdict one kind of run needs (a `metastable` only the
        // runs that stay down have) is not hidden by the corpus's total.
        per_file.push((name.clone(), tally.right as f64 / tally.labelled.max(1) as f64));
        total.labelled += tally.labelled;
        total.right += tally.right;
    }
    let share = total.right as f64 / total.labelled as f64;
    report.push_str(&format!(
        "corpus: {}/{} labelled intervals right ({:.1} %)\n",
        total.right,
        total.labelled,
        100.0 * share
    ));
    eprint!("{report}");
    assert!(share >= 0.95, "{report}");
    let poor: Vec<_> = per_file.iter().filter(|(_, s)| *s < 0.9).collect();
    assert!(poor.is_empty(), "runs below 90 % right: {poor:?}\n{report}");
}
