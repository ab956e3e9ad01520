//! Mints queue tickets for visitors already in a room's line on Redis (filled by `redis_fill`),
//! for `bench/edge-load`: COUNT visitors spread over the line, one line per visitor of
//! `anteroom_vid=<id>; anteroom_q.<room>=<ticket>`, signed with the bench's cookie key.
//!
//!     cargo run --release --example edge_tickets -- redis://127.0.0.1:6379 bench KEY 100000 out.txt

use std::io::Write;

use anteroom::cookie::CookieKey;
use anteroom::line::ticket::{self, Ticket};
use anteroom::store::line::Place;
use anteroom::store::VisitorId;

async fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, room, key, count, out] = args.as_slice() else {
        return Err("usage: edge_tickets REDIS_URL ROOM COOKIE_KEY COUNT OUT".into());
    };
    let count: u64 = count.parse().map_err(|_| "COUNT is a number")?;
    let key = CookieKey::new(key.as_bytes()).ok_or("bad key")?;
    let mut c = ::redis::Client::open(url.as_str())
        .map_err(|e| e.to_string())?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let waiting_key = format!("{{anteroom:{room}}}:waiting");
    let room_key = format!("{{anteroom:{room}}}:room");
    let n: u64 = ::redis::cmd("ZCARD")
        .arg(&waiting_key)
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    let epoch: String = ::redis::cmd("HGET")
        .arg(&room_key)
        .arg("epoch")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    let epoch: u64 = epoch.parse::<f64>().map_err(|e| e.to_string())? as u64;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs();
    let mut file = std::io::BufWriter::new(std::fs::File::create(out).map_err(|e| e.to_string())?);
    let stride = (n / count.max(1)).max(1);
    let mut written = 0u64;
    let mut rank = 1000.min(n.saturating_sub(1));
    while written < count && rank < n {
        let e: Vec<(Vec<u8>, f64)> = ::redis::cmd("ZRANGE")
            .arg(&waiting_key)
            .arg(rank)
            .arg(rank)
            .arg("WITHSCORES")
            .query_async(&mut c)
            .await
            .map_err(|e| e.to_string())?;
        if let Some((id, score)) = e.into_iter().next() {
            let id: [u8; 16] = id.try_into().map_err(|_| "a member is not 16 bytes")?;
            let vid = VisitorId::from_bytes(id);
            let t = Ticket {
                vid,
                place: Place {
                    epoch,
                    key: (score / 4096.0).floor() as u64,
                },
                seen: now,
                shown: rank + 1,
                predicted: None,
                drawn: false,
            };
            let value = ticket::sign(std::slice::from_ref(&key), room, &t).ok_or("unsigned")?;
            writeln!(
                file,
                "anteroom_vid={vid}; {}={value}",
                ticket::cookie_name(room)
            )
            .map_err(|e| e.to_string())?;
            written += 1;
        }
        rank += stride;
    }
    file.flush().map_err(|e| e.to_string())?;
    println!("{written} tickets of a line of {n}");
    Ok(())
}

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
