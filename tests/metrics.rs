//! `/metrics` does not make the server grow while nobody scrapes it. The exporter keeps each
//! latency recorded (16 bytes) until its upkeep counts them into their buckets; the
//! server runs that upkeep every few seconds (`src/http/prometheus.rs`). Counted from the
//! bytes this process holds, so this test has its binary to itself: the count is global.

// The helpers serve the api suite too; this binary uses a few of them.
#[allow(dead_code)]
#[path = "api/helpers.rs"]
mod helpers;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use practice_api::config::ServeConfig;
use rstest::rstest;

use helpers::{Engine, free_port, test_config};

/// Bytes allocated and not yet freed, by anything in this process.
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The system's allocator, counting the bytes it holds in [`LIVE`].
struct Counting;

// SAFETY: every call goes to the system's allocator as it came, and its result comes back
// unchanged; beside it, only an atomic count moves.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's promises about `layout` are passed on.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is the system's, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`, and the caller's promises about `new_size` are passed on.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The one metric whose samples the exporter keeps: the requests' latency.
const DURATION: &str = "practice_request_duration_seconds";

/// Samples recorded at once: about 16 MB kept until an upkeep, against the few hundred
/// kilobytes an idle server's own allocations move by.
const SAMPLES: usize = 1_000_000;

/// Bytes the samples may still hold, at most, once the upkeep has let them go: a quarter of
/// what they take, whatever else the process held or let go meanwhile.
const HELD_AT_MOST: isize = (SAMPLES * 4) as isize;

/// Latencies recorded in each quarter of a second while the test waits: a server still
/// answering requests, slowly.
const TRICKLE: usize = 25;

/// The engines' cases run one after the other: each measures the whole process.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latencies_are_let_go_without_a_scrape(#[case] engine: Engine) {
    let _alone = ONE_AT_A_TIME.lock().await;
    let port = free_port();
    let app = spawn!(
        engine,
        ServeConfig {
            metrics_listen: Some(format!("127.0.0.1:{port}")),
            ..test_config()
        }
    );
    // Once /metrics answers, the server's recorder is this process's (the first case's
    // server installed it, for both: its latencies are counted already).
    let metrics_url = format!("http://127.0.0.1:{port}/metrics");
    let mut counted = None;
    for _ in 0..100 {
        if let Ok(answer) = app.client.get(&metrics_url).send().await {
            assert!(answer.status().is_success(), "{}", answer.status());
            counted = Some(count_of(&answer.text().await.expect("text")));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let counted = counted.unwrap_or_else(|| panic!("no metrics at {metrics_url}"));
    let latency = metrics::histogram!(DURATION, "operation" => "patient");
    // That scrape let go of what the case before left; its bytes are freed as recordings
    // pass. Recorded until the count stays put, so that they are not counted as these.
    let mut last = LIVE.load(Ordering::Relaxed);
    for _ in 0..50 {
        for _ in 0..2_000 {
            latency.record(0.002);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = LIVE.load(Ordering::Relaxed);
        if (now - last).abs() < 100_000 {
            break;
        }
        last = now;
    }

    // As many latencies as a busy server records in a couple of minutes, and no scrape.
    let before = LIVE.load(Ordering::Relaxed);
    for _ in 0..SAMPLES {
        latency.record(0.002);
    }
    // (An upkeep may already have let some go: the bound below is absolute.)
    let kept = LIVE.load(Ordering::Relaxed) - before;

    // The server's upkeep lets them go, with nobody asking for /metrics, while requests go
    // on being answered (a few latencies more every 50 ms: the exporter frees what it let go
    // of as later recordings pass, crossbeam's epochs, not at once).
    let waited = Instant::now();
    let mut left = kept;
    while waited.elapsed() < Duration::from_secs(20) {
        for _ in 0..(TRICKLE / 5) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            for _ in 0..5 {
                latency.record(0.002);
            }
        }
        left = LIVE.load(Ordering::Relaxed) - before;
        if left < HELD_AT_MOST {
            break;
        }
    }
    assert!(
        left < HELD_AT_MOST,
        "{left} bytes still held after {:?} without a scrape, {kept} once {SAMPLES} latencies \
         were recorded",
        waited.elapsed()
    );
    // Each latency still counts, in its bucket.
    let text = app
        .client
        .get(&metrics_url)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let count = count_of(&text);
    assert!(
        count > counted + SAMPLES,
        "{count} latencies counted, {counted} before these {SAMPLES}, in\n{text}"
    );
}

/// The latencies of `patient` requests that the metrics' text counts (0 for none yet).
fn count_of(text: &str) -> usize {
    text.lines()
        .find(|line| line.starts_with(&format!("{DURATION}_count{{operation=\"patient\"}}")))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}
