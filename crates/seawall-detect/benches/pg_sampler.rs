//! What `seawall detect --postgres` costs the database: the CPU time of the sampler's own
//! backend process per sample, read from `/proc/PID/stat` (PostgreSQL on this host), against a
//! `SELECT 1` round trip on the same connection in the same run, with 30 other sessions
//! running one statement (the pile-up the sampler is there to see: 30 rows to group).
//!
//! `cargo bench -p seawall-detect --features postgres --bench pg_sampler` (PostgreSQL on
//! 127.0.0.1:5432, or `SEAWALL_LAB_PG=postgres://…`; `SEAWALL_PG_SAMPLES` samples, default 3000).

use std::time::{Duration, Instant};

use seawall_detect::postgres::{PgOptions, PgSampler};
use tokio_postgres::NoTls;

/// utime + stime of a process, seconds (clock ticks at the kernel's usual 100 Hz).
fn cpu_s(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .expect("the backend runs on this host (a local PostgreSQL) and /proc is readable");
    // Fields after the command name, which is parenthesised and may hold spaces.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn main() {
    let url = std::env::var("SEAWALL_LAB_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string());
    let n: u32 =
        std::env::var("SEAWALL_PG_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        // The pile-up: 30 sessions sleeping in one statement for the whole measurement.
        let mut sleepers = Vec::new();
        for _ in 0..30 {
            let (c, conn) = tokio_postgres::connect(&url, NoTls).await.expect("PostgreSQL");
            tokio::spawn(conn);
            sleepers.push(tokio::spawn(async move {
                let _ = c.simple_query("SELECT pg_sleep(120)").await;
            }));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let sampler = PgSampler::connect(&url, &PgOptions::default()).await.expect("connect");
        let pid = sampler.backend_pid().await.expect("pid");
        let (plain, conn) = tokio_postgres::connect(&url, NoTls).await.expect("PostgreSQL");
        tokio::spawn(conn);
        let plain_pid: i32 = plain.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);

        let (c0, t0) = (cpu_s(pid), Instant::now());
        let mut rows = 0;
        for _ in 0..n {
            rows = sampler.sample().await.expect("sample").statements[0].running_copies;
        }
        let (sample_cpu, sample_wall) = (cpu_s(pid) - c0, t0.elapsed().as_secs_f64());
        let (c1, t1) = (cpu_s(plain_pid), Instant::now());
        for _ in 0..n {
            plain.query_one("SELECT 1", &[]).await.unwrap();
        }
        let (one_cpu, one_wall) = (cpu_s(plain_pid) - c1, t1.elapsed().as_secs_f64());
        let per = |x: f64| x / f64::from(n) * 1e3;
        println!("samples: {n}; largest group seen: {rows} copies");
        println!(
            "sampler: {:.3} ms backend CPU, {:.3} ms wall per sample",
            per(sample_cpu),
            per(sample_wall)
        );
        println!(
            "SELECT 1: {:.3} ms backend CPU, {:.3} ms wall per query",
            per(one_cpu),
            per(one_wall)
        );
        println!(
            "ratio (sampler / SELECT 1, backend CPU): {:.1}x; at a 1 s interval the sampler uses \
             {:.3} % of one core",
            sample_cpu / one_cpu.max(1e-9),
            per(sample_cpu) / 1000.0 * 100.0
        );
        for s in sleepers {
            s.abort();
        }
    });
}
