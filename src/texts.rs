//! The waiting page's words, in English and Korean, chosen by `Accept-Language`; every one can
//! be replaced per room by the operator (`[room.texts.en]`, `[room.texts.ko]`).

use std::collections::BTreeMap;

/// Languages with built-in texts; the first is the default.
pub const LANGUAGES: [&str; 2] = ["en", "ko"];

/// (key, English, Korean). `{n}` stands for a number.
pub const TEXTS: &[(&str, &str, &str)] = &[
    ("title_waiting", "You're in line", "대기 중입니다"),
    ("title_count", "You're in line ({n})", "대기 중 ({n})"),
    (
        "lead_waiting",
        "Thanks for waiting. When it's your turn, this page takes you to the shop automatically.",
        "기다려 주셔서 감사합니다. 차례가 되면 이 페이지가 자동으로 쇼핑몰로 이동합니다.",
    ),
    ("title_full", "The line is full right now", "지금은 대기열이 가득 찼습니다"),
    (
        "lead_full",
        "Too many people are waiting at the moment. This page tries again automatically, so there is no need to refresh.",
        "지금 기다리는 분이 너무 많습니다. 이 페이지가 자동으로 다시 시도하니 새로 고침하지 않으셔도 됩니다.",
    ),
    ("title_paused", "The line is on hold", "대기열이 잠시 멈췄습니다"),
    (
        "lead_paused",
        "The sale has not opened yet or admissions are paused. Your place is kept.",
        "판매가 아직 시작되지 않았거나 입장이 잠시 중단되었습니다. 순서는 그대로 유지됩니다.",
    ),
    ("title_closed", "This sale is closed", "판매가 종료되었습니다"),
    (
        "lead_closed",
        "Thank you for your interest. There is no line to join right now.",
        "관심 가져 주셔서 감사합니다. 지금은 대기할 수 있는 줄이 없습니다.",
    ),
    ("title_challenge", "One moment", "잠시만 기다려 주세요"),
    (
        "lead_challenge",
        "Your browser is doing a short check before you join the line. It takes a second or two.",
        "대기열에 들어가기 전에 브라우저가 짧은 확인을 하고 있습니다. 1~2초면 끝납니다.",
    ),
    (
        "no_script_challenge",
        "Your browser does not run scripts, so it cannot do the check: this page joins the line for you in a moment, under a stricter limit of new visitors per network. The limit keeps programs that skip the check from taking many places.",
        "브라우저에서 스크립트가 실행되지 않아 확인을 할 수 없습니다. 잠시 후 이 페이지가 대신 대기열에 들어가며, 네트워크당 새 방문자 수를 더 엄격하게 제한합니다. 이 제한은 확인을 건너뛰는 프로그램이 많은 자리를 차지하지 못하게 합니다.",
    ),
    ("title_admitted", "It's your turn", "차례가 되었습니다"),
    ("lead_admitted", "Taking you to the shop now.", "지금 쇼핑몰로 이동합니다."),
    ("continue_link", "Continue to the shop", "쇼핑몰로 이동"),
    ("place_label", "Your place in line", "내 대기 순서"),
    ("waiting_label", "People in line", "대기 인원"),
    ("eta_label", "Estimated wait", "예상 대기 시간"),
    ("eta_unknown", "not known yet", "아직 알 수 없음"),
    (
        "eta_held",
        "when someone leaves the shop",
        "쇼핑몰에서 누군가 나가는 대로",
    ),
    ("eta_less_minute", "less than a minute", "1분 미만"),
    ("eta_minute", "about a minute", "약 1분"),
    ("eta_minutes", "about {n} minutes", "약 {n}분"),
    ("eta_hour", "about an hour", "약 1시간"),
    ("eta_hours", "about {n} hours", "약 {n}시간"),
    ("eta_range_minutes", "{lo} to {hi} minutes", "{lo}~{hi}분"),
    ("eta_range_hours", "{lo} to {hi} hours", "{lo}~{hi}시간"),
    (
        "eta_range_note",
        "This is an estimate. The line's pace is still changing, so your wait will most likely fall within this range.",
        "예상 시간입니다. 대기열 속도가 아직 변하고 있어 실제 대기 시간은 대개 이 범위 안에 들어옵니다.",
    ),
    ("progress_label", "Progress through the line", "대기 진행률"),
    (
        "keep_tab",
        "Keep this tab open — refreshing does not lose your place.",
        "이 탭을 열어 두세요. 새로 고침해도 순서는 유지됩니다.",
    ),
    (
        "form_not_sent",
        "What you sent from the previous page was not passed on to the shop while you waited: send it again once you are let in.",
        "기다리는 동안 이전 페이지에서 보내신 내용은 쇼핑몰에 전달되지 않았습니다. 입장한 뒤 다시 보내 주세요.",
    ),
    (
        "cookies_required",
        "This browser is refusing cookies from this site, so it cannot keep a place in line: every visit would join again at the end. Allow cookies for this site, then reload this page.",
        "이 브라우저가 이 사이트의 쿠키를 거부하고 있어 대기 순서를 유지할 수 없습니다. 방문할 때마다 맨 뒤에 다시 줄을 서게 됩니다. 이 사이트의 쿠키를 허용한 뒤 페이지를 새로 고침해 주세요.",
    ),
    ("title_prequeue", "You're registered", "등록되었습니다"),
    (
        "lead_prequeue_draw",
        "Your place in line is drawn at random when the sale opens, among everyone registered before then: coming early or late before the opening makes no difference. Keep this tab open; it takes you to the shop when your turn comes.",
        "판매가 시작될 때 그 전에 등록한 모든 분 가운데에서 대기 순서를 무작위로 추첨합니다. 시작 전이라면 일찍 오든 늦게 오든 차이가 없습니다. 이 탭을 열어 두시면 차례가 되었을 때 쇼핑몰로 이동합니다.",
    ),
    (
        "lead_prequeue",
        "The sale has not opened yet. Your place in line is kept: keep this tab open, and it takes you to the shop when your turn comes.",
        "판매가 아직 시작되지 않았습니다. 대기 순서는 유지됩니다. 이 탭을 열어 두시면 차례가 되었을 때 쇼핑몰로 이동합니다.",
    ),
    ("opens_label", "The sale opens", "판매 시작"),
    ("countdown_label", "Opens in", "시작까지"),
    ("registered_label", "Registered so far", "지금까지 등록한 인원"),
    ("ticket_label", "Your registration ticket", "내 등록 번호"),
    (
        "commitment_label",
        "Draw commitment (SHA-256 of the seed)",
        "추첨 약속값 (시드의 SHA-256)",
    ),
    ("seed_label", "Draw seed", "추첨 시드"),
    (
        "verify_link",
        "The draw, its seed and every registration ticket",
        "추첨, 시드와 모든 등록 번호",
    ),
    (
        "verify_note",
        "The draw is fixed now and cannot be changed: when the sale opens, the seed behind this commitment and the list of all registration tickets are published, and anyone can check every place (anteroom verify-draw).",
        "추첨 결과는 지금 이미 정해져 있으며 바꿀 수 없습니다. 판매가 시작되면 이 약속값의 시드와 모든 등록 번호 목록이 공개되어 누구나 모든 순서를 확인할 수 있습니다 (anteroom verify-draw).",
    ),
    ("title_ended", "This sale has ended", "이번 판매는 끝났습니다"),
    (
        "lead_ended",
        "Thank you for your interest. This sale is over, and the line takes nobody new.",
        "관심 가져 주셔서 감사합니다. 이번 판매는 끝났으며 더 이상 대기열에 새로 들어올 수 없습니다.",
    ),
];

/// One language's texts, after the room's overrides.
pub type TextSet = BTreeMap<String, String>;

/// The built-in texts of a language (`None` for one we do not ship).
pub fn builtin(lang: &str) -> Option<TextSet> {
    let i = LANGUAGES.iter().position(|l| *l == lang)?;
    Some(
        TEXTS
            .iter()
            .map(|(k, en, ko)| (k.to_string(), if i == 0 { en } else { ko }.to_string()))
            .collect(),
    )
}

/// The `{name}` placeholders of `text`, in order.
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close)
                if close > 0
                    && after[..close]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                out.push(&after[..close]);
                rest = &after[close + 1..];
            }
            _ => rest = after,
        }
    }
    out
}

/// The placeholders the built-in English text of `key` uses: what an operator's text of it
/// may use.
pub fn placeholders_of(key: &str) -> Vec<&'static str> {
    TEXTS
        .iter()
        .find(|t| t.0 == key)
        .map_or_else(Vec::new, |t| placeholders(t.1))
}

pub fn is_key(key: &str) -> bool {
    TEXTS.iter().any(|(k, _, _)| *k == key)
}

/// The best of our languages for an `Accept-Language` header; English when nothing matches.
pub fn negotiate(accept_language: Option<&str>) -> &'static str {
    let Some(header) = accept_language else {
        return LANGUAGES[0];
    };
    let mut best = (LANGUAGES[0], 0.0f32);
    for (tag, q) in crate::page::weighted(header) {
        let primary = tag.split('-').next().unwrap_or("");
        if let Some(lang) = LANGUAGES.iter().find(|l| **l == primary) {
            if q > best.1 {
                best = (lang, q);
            }
        }
    }
    best.0
}

/// `eta_minutes` etc. with the number filled in.
pub fn eta_text(t: &TextSet, secs: u64) -> String {
    let get = |k: &str| t.get(k).cloned().unwrap_or_default();
    match secs {
        0..=59 => get("eta_less_minute"),
        60..=89 => get("eta_minute"),
        90..=5399 => get("eta_minutes").replace("{n}", &((secs + 30) / 60).to_string()),
        _ => {
            let h = (secs + 1800) / 3600;
            if h == 1 {
                get("eta_hour")
            } else {
                get("eta_hours").replace("{n}", &h.to_string())
            }
        }
    }
}

/// A range of waits in words: `eta_range_minutes` or `eta_range_hours` with the ends filled in,
/// rounded outwards (the low end down, but to at least 1; the high end up), so that the words
/// never claim a narrower range than was computed; `eta_less_minute` under a minute. The
/// waiting page's script words a range the same way.
pub fn eta_range_text(t: &TextSet, lo: u64, hi: u64) -> String {
    let get = |k: &str| t.get(k).cloned().unwrap_or_default();
    let range = |key: &str, unit: u64| {
        let (a, b) = ((lo / unit).max(1), hi.div_ceil(unit).max(2));
        get(key)
            .replace("{lo}", &a.min(b - 1).to_string())
            .replace("{hi}", &b.to_string())
    };
    match hi {
        0..=59 => get("eta_less_minute"),
        60..=5399 => range("eta_range_minutes", 60),
        _ => range("eta_range_hours", 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_are_negotiated() {
        assert_eq!(negotiate(None), "en");
        assert_eq!(negotiate(Some("ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7")), "ko");
        assert_eq!(negotiate(Some("en-US,en;q=0.9,ko;q=0.8")), "en");
        assert_eq!(negotiate(Some("fr-FR,fr;q=0.9")), "en");
        assert_eq!(negotiate(Some("fr;q=0.9, ko;q=0.5")), "ko");
    }

    #[test]
    fn every_text_exists_in_both_languages() {
        for lang in LANGUAGES {
            let t = builtin(lang).unwrap();
            assert_eq!(t.len(), TEXTS.len());
            assert!(t.values().all(|v| !v.is_empty()));
        }
        let ko = builtin("ko").unwrap();
        assert_eq!(eta_text(&ko, 600), "약 10분");
        assert_eq!(eta_text(&builtin("en").unwrap(), 7200), "about 2 hours");
    }

    #[test]
    fn a_range_is_worded_in_one_unit() {
        let en = builtin("en").unwrap();
        assert_eq!(eta_range_text(&en, 10, 50), "less than a minute");
        assert_eq!(eta_range_text(&en, 20, 100), "1 to 2 minutes");
        assert_eq!(eta_range_text(&en, 38, 83), "1 to 2 minutes");
        assert_eq!(eta_range_text(&en, 210, 450), "3 to 8 minutes");
        assert_eq!(
            eta_range_text(&en, 100, 110),
            "1 to 2 minutes",
            "never one number"
        );
        assert_eq!(eta_range_text(&en, 2400, 9000), "1 to 3 hours");
        assert_eq!(eta_range_text(&en, 7300, 7400), "2 to 3 hours");
        let ko = builtin("ko").unwrap();
        assert_eq!(eta_range_text(&ko, 210, 450), "3~8분");
    }
}
