//! Packets on a byte stream. A packet is either a raw JSON object or one
//! gzip member whose content is a JSON object; the two may be mixed on one
//! connection, and the kind is decided per packet by its first byte:
//!
//! * `0x1f 0x8b` (the gzip magic) starts a gzip member. The member is
//!   self-delimiting (deflate's final block, then the 8-byte CRC-32 and
//!   size trailer); the packet ends where the member ends.
//! * `{` starts a raw packet, which ends where its JSON object ends.
//!   Writing one object per line (newline-delimited JSON) is what clients
//!   should do, but the newline is not needed.
//!
//! Whitespace (space, tab, `\r`, `\n`) between packets is skipped, so
//! `\r\n` line ends and trailing blanks are fine. Several packets may come
//! in one write and one packet may be split across many.
//!
//! A raw packet that is not valid JSON (or a line that starts with neither)
//! is reported and skipped up to and including the next newline; the
//! connection goes on. A packet larger than the limit, or a gzip member
//! that is corrupt or decompresses past its limit, is reported as fatal:
//! the stream cannot be resynchronised, so the connection is closed.

use serde_json::Value;
use std::io::Read;

/// Longest packet on the wire (raw JSON, or a gzip member), in bytes.
pub const MAX_PACKET: usize = 1024 * 1024;
/// Longest content a gzip packet may decompress to, in bytes. Decoding
/// stops as soon as it is passed.
pub const MAX_DECODED: usize = 4 * 1024 * 1024;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// What the decoder found next.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A whole packet; `gzip` tells how it came.
    Packet { value: Value, gzip: bool },
    /// A packet that could not be read. When `fatal`, the stream cannot be
    /// resynchronised and the connection must close.
    Error { message: String, fatal: bool, gzip: bool },
}

/// Incremental packet decoder of one connection.
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Discarding a malformed raw packet, up to the next newline.
    skipping: bool,
    max_packet: usize,
    max_decoded: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(MAX_PACKET, MAX_DECODED)
    }
}

enum Gz {
    Done { consumed: usize, out: Vec<u8> },
    More,
    TooBig,
    Corrupt(String),
}

/// Decodes the gzip member at the start of `buf`, up to `max` bytes of
/// content.
fn gunzip(buf: &[u8], max: usize) -> Gz {
    let mut rest = buf;
    let mut out = Vec::new();
    let read = {
        let decoder = flate2::bufread::GzDecoder::new(&mut rest);
        decoder.take(max as u64 + 1).read_to_end(&mut out)
    };
    match read {
        Ok(_) if out.len() > max => Gz::TooBig,
        Ok(_) => Gz::Done { consumed: buf.len() - rest.len(), out },
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Gz::More,
        Err(e) => Gz::Corrupt(e.to_string()),
    }
}

impl Decoder {
    pub fn new(max_packet: usize, max_decoded: usize) -> Decoder {
        Decoder { buf: Vec::new(), skipping: false, max_packet, max_decoded }
    }

    /// Bytes received.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held, waiting for the rest of a packet.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Whether a packet (or a malformed line being skipped) has begun and
    /// not ended.
    pub fn mid_packet(&self) -> bool {
        self.skipping || self.buf.iter().any(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    }

    /// The next packet or error; `None` until more bytes are needed.
    pub fn next_item(&mut self) -> Option<Item> {
        if self.skipping {
            match self.buf.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.buf.drain(..=i);
                    self.skipping = false;
                }
                None => {
                    self.buf.clear();
                    return None;
                }
            }
        }
        let start = self.buf.iter().position(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
        match start {
            None => {
                self.buf.clear();
                return None;
            }
            Some(i) => {
                self.buf.drain(..i);
            }
        }
        match self.buf[0] {
            0x1f => self.gzip(),
            b'{' => self.raw(),
            _ => {
                self.skipping = true;
                Some(Item::Error {
                    message: "a packet is a JSON object or a gzip member; the line was skipped".into(),
                    fatal: false,
                    gzip: false,
                })
            }
        }
    }

    fn gzip(&mut self) -> Option<Item> {
        if self.buf.len() < 2 {
            return None;
        }
        let fatal = |message: String| Some(Item::Error { message, fatal: true, gzip: true });
        if self.buf[..2] != GZIP_MAGIC {
            return fatal("a packet starting with 0x1f must be a gzip member (0x1f 0x8b)".into());
        }
        match gunzip(&self.buf, self.max_decoded) {
            Gz::More if self.buf.len() > self.max_packet => {
                fatal(format!("gzip packet longer than {} bytes", self.max_packet))
            }
            Gz::More => None,
            Gz::TooBig => fatal(format!("gzip packet decompresses to more than {} bytes", self.max_decoded)),
            Gz::Corrupt(e) => fatal(format!("corrupt gzip packet: {e}")),
            Gz::Done { consumed, out } => {
                self.buf.drain(..consumed);
                Some(match serde_json::from_slice::<Value>(&out) {
                    Ok(value @ Value::Object(_)) => Item::Packet { value, gzip: true },
                    Ok(_) => Item::Error {
                        message: "a gzip packet must hold a JSON object".into(),
                        fatal: false,
                        gzip: true,
                    },
                    Err(e) => Item::Error {
                        message: format!("gzip packet content is not JSON: {e}"),
                        fatal: false,
                        gzip: true,
                    },
                })
            }
        }
    }

    fn raw(&mut self) -> Option<Item> {
        let mut stream = serde_json::Deserializer::from_slice(&self.buf).into_iter::<Value>();
        match stream.next() {
            Some(Ok(value)) => {
                let consumed = stream.byte_offset();
                self.buf.drain(..consumed);
                Some(Item::Packet { value, gzip: false })
            }
            Some(Err(e)) if e.is_eof() => {
                if self.buf.len() > self.max_packet {
                    Some(Item::Error {
                        message: format!("packet longer than {} bytes", self.max_packet),
                        fatal: true,
                        gzip: false,
                    })
                } else {
                    None
                }
            }
            Some(Err(e)) => {
                self.skipping = true;
                Some(Item::Error { message: format!("malformed JSON packet: {e}"), fatal: false, gzip: false })
            }
            None => None,
        }
    }
}

/// One packet as written: compact JSON and a newline, or one gzip member
/// of the same bytes.
pub fn encode(packet: &Value, gzip: bool) -> Vec<u8> {
    let mut text = serde_json::to_vec(packet).unwrap_or_else(|_| b"{}".to_vec());
    text.push(b'\n');
    if !gzip {
        return text;
    }
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, &text).expect("writing to a Vec");
    enc.finish().expect("writing to a Vec")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn all(d: &mut Decoder) -> Vec<Item> {
        std::iter::from_fn(|| d.next_item()).collect()
    }

    fn decode_split(stream: &[u8], cuts: &[usize]) -> Vec<Item> {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        let mut from = 0;
        for &c in cuts.iter().chain(std::iter::once(&stream.len())) {
            d.push(&stream[from..c]);
            out.extend(all(&mut d));
            from = c;
        }
        out
    }

    fn sample() -> (Vec<u8>, Vec<Item>) {
        let a = json!({"type": "QUERY", "data": {"message": "hello {world}\n"}});
        let b = json!({"type": "ADD_TOOL", "data": {"name": "x"}});
        let c = json!({"type": "QUERY", "data": {"message": "ünïcode"}});
        let mut s = Vec::new();
        s.extend(encode(&a, false));
        s.extend(b"  \r\n");
        s.extend(encode(&b, true));
        s.extend(encode(&c, true));
        s.extend(b"not json\r\n");
        s.extend(serde_json::to_vec(&c).unwrap());
        s.extend(b"\r\n");
        s.extend(serde_json::to_vec(&a).unwrap());
        let want = vec![
            Item::Packet { value: a.clone(), gzip: false },
            Item::Packet { value: b, gzip: true },
            Item::Packet { value: c.clone(), gzip: true },
            Item::Error {
                message: "a packet is a JSON object or a gzip member; the line was skipped".into(),
                fatal: false,
                gzip: false,
            },
            Item::Packet { value: c, gzip: false },
            Item::Packet { value: a, gzip: false },
        ];
        (s, want)
    }

    #[test]
    fn every_single_split_point_gives_the_same_packets() {
        let (s, want) = sample();
        assert_eq!(decode_split(&s, &[]), want);
        for cut in 0..=s.len() {
            assert_eq!(decode_split(&s, &[cut]), want, "split at {cut}");
        }
    }

    #[test]
    fn byte_by_byte_and_pairs_of_splits_give_the_same_packets() {
        let (s, want) = sample();
        let every: Vec<usize> = (1..s.len()).collect();
        assert_eq!(decode_split(&s, &every), want);
        for a in (0..s.len()).step_by(7) {
            for b in (a..s.len()).step_by(5) {
                assert_eq!(decode_split(&s, &[a, b]), want, "split at {a} and {b}");
            }
        }
    }

    #[test]
    fn malformed_json_is_skipped_to_the_end_of_its_line() {
        let mut d = Decoder::default();
        d.push(b"{\"type\": oops}\n{\"type\":\"QUERY\"}\n");
        let items = all(&mut d);
        assert_eq!(items.len(), 2);
        assert!(matches!(&items[0], Item::Error { fatal: false, message, .. } if message.contains("malformed JSON")));
        assert_eq!(items[1], Item::Packet { value: json!({"type": "QUERY"}), gzip: false });
    }

    #[test]
    fn an_oversized_packet_is_fatal() {
        let mut d = Decoder::new(100, 1000);
        d.push(format!("{{\"type\": \"{}", "a".repeat(200)).as_bytes());
        assert!(matches!(d.next_item(), Some(Item::Error { fatal: true, .. })));
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_limit() {
        let zeros = vec![b' '; 50 * 1024 * 1024];
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut enc, b"{\"type\":\"QUERY\"}").unwrap();
        std::io::Write::write_all(&mut enc, &zeros).unwrap();
        let bomb = enc.finish().unwrap();
        assert!(bomb.len() < MAX_PACKET);
        let mut d = Decoder::default();
        d.push(&bomb);
        match d.next_item() {
            Some(Item::Error { fatal: true, message, gzip: true }) => {
                assert!(message.contains("decompresses"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn corrupt_gzip_is_fatal_and_a_bad_magic_too() {
        let mut g = encode(&json!({"type": "QUERY"}), true);
        let n = g.len();
        g[n - 3] ^= 0xff; // the size in the trailer
        let mut d = Decoder::default();
        d.push(&g);
        assert!(matches!(d.next_item(), Some(Item::Error { fatal: true, .. })));
        let mut d = Decoder::default();
        d.push(&[0x1f, 0x00, 1, 2]);
        assert!(matches!(d.next_item(), Some(Item::Error { fatal: true, .. })));
    }
}
