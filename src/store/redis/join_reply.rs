//! The reply of `lua/join.lua`, typed (see the script's header for its layout).

use std::time::Duration;

use ::redis::{FromRedisValue, ParsingError, Value};

use crate::store::{Admission, Place};

/// `join.lua`'s reply.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinReply(pub Admission);

fn item<T: FromRedisValue>(v: &[Value], i: usize) -> Result<T, ParsingError> {
    let item = v
        .get(i)
        .ok_or_else(|| format!("join reply too short ({} items, wanted {})", v.len(), i + 1))?;
    ::redis::from_redis_value_ref(item)
        .map_err(|e| ParsingError::from(format!("join reply item {i}: {e}")))
}

fn number(s: &str) -> f64 {
    s.parse().unwrap_or(0.0)
}

impl FromRedisValue for JoinReply {
    fn from_redis_value(v: Value) -> Result<Self, ParsingError> {
        let v: Vec<Value> = FromRedisValue::from_redis_value(v)?;
        let code: i64 = item(&v, 0)?;
        let (position, waiting): (u64, u64) = (item(&v, 1)?, item(&v, 2)?);
        let eta: String = item(&v, 3)?;
        let joined = item::<i64>(&v, 4)? == 1;
        let place = || -> Result<Place, ParsingError> {
            Ok(Place {
                key: item(&v, 5)?,
                epoch: item(&v, 6)?,
            })
        };
        Ok(Self(match code {
            0 => Admission::Admitted,
            1 => Admission::Waiting {
                position,
                waiting,
                eta_rate: number(&eta),
                joined,
                place: place()?,
                // Absent from a poll's reply (only a newcomer's carries it).
                full: v.len() > 8 && item::<i64>(&v, 8)? == 1,
            },
            2 => Admission::Paused {
                position,
                waiting,
                joined,
                place: place()?,
            },
            3 => Admission::Full { waiting },
            4 => Admission::Open,
            5 if joined => Admission::Entered,
            5 => Admission::EnteredFromLine,
            6 => Admission::Limited {
                retry_after: Duration::from_millis(number(&eta).max(1.0) as u64),
            },
            7 => {
                let drawn = item::<i64>(&v, 7)? == 1;
                Admission::Registered {
                    position: (!drawn || position > 0).then_some(position),
                    waiting,
                    joined,
                    place: place()?,
                    drawn,
                }
            }
            8 => Admission::Ended,
            9 => Admission::Unplaced { waiting },
            10 => Admission::Settling { waiting },
            other => return Err(format!("join reply: unknown code {other}").into()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(items: Vec<Value>) -> Result<Admission, ParsingError> {
        JoinReply::from_redis_value(Value::Array(items)).map(|r| r.0)
    }

    fn s(x: &str) -> Value {
        Value::BulkString(x.as_bytes().to_vec())
    }

    #[test]
    fn a_place_comes_with_waiting_and_paused() {
        let i = Value::Int;
        assert_eq!(
            reply(vec![i(1), i(3), i(9), s("17.5"), i(0), i(1234), i(99)]).unwrap(),
            Admission::Waiting {
                position: 3,
                waiting: 9,
                eta_rate: 17.5,
                joined: false,
                place: Place {
                    epoch: 99,
                    key: 1234
                },
                full: false,
            }
        );
        assert!(matches!(
            reply(vec![i(2), i(1), i(1), s("0"), i(1), i(5), i(6)]).unwrap(),
            Admission::Paused {
                joined: true,
                place: Place { epoch: 6, key: 5 },
                ..
            }
        ));
        assert_eq!(
            reply(vec![i(6), i(0), i(0), s("2500"), i(0)]).unwrap(),
            Admission::Limited {
                retry_after: Duration::from_millis(2500)
            }
        );
        assert!(
            reply(vec![i(1), i(3), i(9), s("1"), i(0)]).is_err(),
            "a place is due"
        );
        assert_eq!(
            reply(vec![i(9), i(0), i(4), s("0"), i(0)]).unwrap(),
            Admission::Unplaced { waiting: 4 }
        );
        assert_eq!(
            reply(vec![i(10), i(0), i(3), s("0"), i(0)]).unwrap(),
            Admission::Settling { waiting: 3 }
        );
        assert!(reply(vec![i(11), i(0), i(0), s("0"), i(0)]).is_err());
        // Registered: a draw's place has no position before the opening.
        assert_eq!(
            reply(vec![i(7), i(0), i(40), s("5"), i(1), i(77), i(6), i(1)]).unwrap(),
            Admission::Registered {
                position: None,
                waiting: 40,
                joined: true,
                place: Place { epoch: 6, key: 77 },
                drawn: true,
            }
        );
        assert!(matches!(
            reply(vec![i(7), i(3), i(40), s("5"), i(0), i(77), i(6), i(0)]).unwrap(),
            Admission::Registered {
                position: Some(3),
                drawn: false,
                ..
            }
        ));
        assert_eq!(
            reply(vec![i(8), i(0), i(0), s("0"), i(0)]).unwrap(),
            Admission::Ended
        );
    }
}
