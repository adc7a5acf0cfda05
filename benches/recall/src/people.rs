//! The people dataset: long conversations between two named people, made
//! from a fixed seed by templates and word lists (no files, no network).
//!
//! Each conversation is between two people with distinct first names and
//! has 18-24 dated sessions about two years long (16-42 days apart, so a
//! calendar month holds at most two sessions), each 12-20 turns that
//! alternate between the two speakers, a minute apart. A session opens with
//! a greeting and closes with a goodbye; in between, chit-chat on everyday
//! things (work, family, food, plans, holidays, the weather, the month or
//! the season) written to share the questions' vocabulary, and the planted
//! evidence, each a statement by one person and a reply by the other:
//!
//! - events: 5-6 one-off activities per person ("I finally ran my first
//!   half marathon this morning"), each in its own session, each answered
//!   by the other speaker with the person's name and the topic ("Nice one,
//!   Sam! How did the half marathon feel at the finish?"): the trap for
//!   questions that name the person;
//! - things tried: per person, 4 kinds (sports, instruments, cuisines,
//!   places travelled, crafts, languages, board games), 3-4 items of each
//!   tried in different sessions, each first try in words that share one
//!   word with the question ("a whole new sport for me"); one item of each
//!   kind comes back in 1-3 later sessions in near-duplicate words that
//!   share all of them ("Of all the sports I've tried it's the one I keep
//!   going back to"): the trap for diversity;
//! - facts stated once: 4-5 per person (a pet's name, where a sibling lives,
//!   the job, a partner, where they grew up, an allergy, the car, a child, a
//!   birthday), several in words the question does not use;
//! - traits: 4 per person, each stated in two sessions in words the
//!   question does not use ("Nothing beats a weekend up in the mountains").
//!
//! An activity is an event or a first try: something the person did on the
//! session's date. Each conversation has a reference time (10 days after
//! its last turn), sent with every question. Time is UTC; "May 2024" is the
//! calendar month, "two months ago" the calendar month two before the
//! reference time's, "last year" the calendar year before it, seasons are
//! meteorological (spring = March-May, summer = June-August, autumn =
//! September-November; winter, which straddles two years, is not asked),
//! "the first week of March 2024" is March 1-7.
//!
//! Questions, with the turns that answer them (gold evidence), all spoken by
//! the person the question names:
//!
//! | category | asks | gold |
//! |---|---|---|
//! | `single-hop` | a fact stated once ("What is the name of Dana's dog?") | the turn that states it |
//! | `multi-hop` | every item of a kind ("Which sports has Sam tried?") | each item once: its first try, or a later mention of it (3-4 items, different sessions; two mentions of one item count once) |
//! | `temporal` | what a person did in a named interval, absolute ("in May 2024", "in the first week of March 2024", "in summer 2023") or relative to the reference time ("two months ago", "last month", "last year"), only for intervals holding 1-3 of the person's activities; and, for at most a third, when an event happened ("When did Sam run a half marathon?") | the person's activities in the interval; the event's turn |
//! | `open-domain` | an inference from a trait ("Would Priya enjoy a hiking holiday?") | the two turns stating the trait |

use crate::gen::{Rng, Turn};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    SingleHop,
    MultiHop,
    Temporal,
    OpenDomain,
}

impl Category {
    pub const ALL: [Category; 4] = [Category::SingleHop, Category::MultiHop, Category::Temporal, Category::OpenDomain];
    pub fn name(self) -> &'static str {
        match self {
            Category::SingleHop => "single-hop",
            Category::MultiHop => "multi-hop",
            Category::Temporal => "temporal",
            Category::OpenDomain => "open-domain",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Question {
    pub category: Category,
    pub text: String,
    /// The person the question is about.
    pub person: &'static str,
    /// (session, turn) of every gold evidence turn.
    pub gold: Vec<(usize, usize)>,
    /// The interval the question names, `[from, until)` in unix ms.
    pub interval: Option<(i64, i64)>,
    /// Turns that answer as well as a gold turn: `(turn, the gold turn it
    /// stands for)`. A later mention of an item tried names it as well as
    /// the first try does.
    pub stands_for: Vec<((usize, usize), (usize, usize))>,
}

impl Question {
    /// `hits` with each turn that stands for a gold turn replaced by it.
    pub fn credited(&self, hits: &[(usize, usize)]) -> Vec<(usize, usize)> {
        hits.iter().map(|h| self.stands_for.iter().find(|(t, _)| t == h).map_or(*h, |(_, g)| *g)).collect()
    }
}

/// What a planted statement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    Event,
    Try,
    Repeat,
    Fact,
    Trait,
}

/// A planted statement and the other speaker's reply to it.
#[derive(Debug, Clone)]
pub struct Planted {
    pub plant: Plant,
    pub person: &'static str,
    pub key: (usize, usize),
    pub reply: (usize, usize),
    /// The event, `kind:item`, fact type or trait.
    pub label: String,
}

impl Planted {
    /// Something the person did on the session's date.
    pub fn is_activity(&self) -> bool {
        matches!(self.plant, Plant::Event | Plant::Try)
    }
}

#[derive(Debug, Clone)]
pub struct Conversation {
    pub id: usize,
    pub people: [&'static str; 2],
    pub turns: Vec<Turn>,
    pub questions: Vec<Question>,
    pub planted: Vec<Planted>,
    /// "Now" for the questions (unix ms).
    pub reference_time: i64,
}

impl Conversation {
    pub fn sessions(&self) -> usize {
        self.turns.iter().map(|t| t.session + 1).max().unwrap_or(0)
    }
    /// The transcript id of a session: `c03-s07`.
    pub fn transcript(&self, session: usize) -> String {
        format!("c{:02}-s{:02}", self.id, session)
    }
    pub fn turn(&self, key: (usize, usize)) -> Option<&Turn> {
        self.turns.iter().find(|t| t.key() == key)
    }
}

const DAY: i64 = 86_400_000;
const MINUTE: i64 = 60_000;
/// 2023-01-01T00:00:00Z.
const EPOCH_2023: i64 = 1_672_531_200_000;
/// At most this many planted statements in one session.
const CAP: usize = 6;

// ---------------------------------------------------------------- calendar

// The proleptic Gregorian arithmetic is tempora's own (`tempora::civil`).
use tempora::civil::days_from_civil;

/// (year, month 1-12, day 1-31) of unix ms, UTC.
pub fn civil(ms: i64) -> (i64, u32, u32) {
    tempora::civil::civil_from_days(ms.div_euclid(DAY))
}

/// Unix ms of a day's midnight, UTC.
pub fn ms(y: i64, m: u32, d: u32) -> i64 {
    days_from_civil(y, m, d) * DAY
}

/// Months since year 0 (`y * 12 + m - 1`) and back.
fn month_index(y: i64, m: u32) -> i64 {
    y * 12 + m as i64 - 1
}
fn month_of_index(i: i64) -> (i64, u32) {
    (i.div_euclid(12), (i.rem_euclid(12) + 1) as u32)
}
/// `[from, until)` of the `count` months starting at month index `i`.
fn months(i: i64, count: i64) -> (i64, i64) {
    let (y, m) = month_of_index(i);
    let (y2, m2) = month_of_index(i + count);
    (ms(y, m, 1), ms(y2, m2, 1))
}

pub const MONTHS: [&str; 12] =
    ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

fn season_name(m: u32) -> &'static str {
    match m {
        3..=5 => "spring",
        6..=8 => "summer",
        9..=11 => "autumn",
        _ => "winter",
    }
}

// ---------------------------------------------------------------- word lists

const NAMES: &[&str] = &[
    "Sam", "Dana", "Priya", "Marco", "Lena", "Omar", "Tara", "Felix", "Nadia", "Hugo", "Kofi", "Mei", "Ravi", "Zoe", "Theo",
    "Amara", "Leila", "Mateo", "Freya", "Anya", "Ezra", "Noor", "Callum", "Sofia", "Yusuf", "Greta", "Diego", "Elena", "Hana",
    "Joel", "Rhea",
];

/// A kind of thing tried: the question, the items, how a first try is told,
/// how the favourite comes back (near-duplicates), and the replies.
struct Kind {
    name: &'static str,
    question: &'static str,
    items: &'static [&'static str],
    tries: &'static [&'static str],
    repeats: &'static [&'static str],
    try_replies: &'static [&'static str],
    repeat_replies: &'static [&'static str],
}

const REPEAT_REPLIES: &[&str] = &[
    "You really love {item}, don't you, {p}?",
    "I know, {p}, you talk about {item} all the time!",
    "Ha, {item} again! I'm not surprised, {p}.",
];

const KINDS: &[Kind] = &[
    Kind {
        name: "sports",
        question: "Which sports has {p} tried?",
        items: &[
            "bouldering", "squash", "rowing", "fencing", "archery", "badminton", "surfing", "kickboxing", "table tennis",
            "volleyball", "lacrosse", "judo",
        ],
        tries: &[
            "I tried {item} for the first time on Saturday, every muscle I own aches today.",
            "Went to a beginners' {item} session last night, a whole new sport for me and I was hopeless.",
            "A friend from work dragged me along to {item} this week, what a sport, I actually loved it.",
            "Had a go at {item} with my cousin yesterday, I think I've found my sport.",
        ],
        repeats: &[
            "Still obsessed with {item}. Of all the sports I've tried it's the one I keep going back to.",
            "Honestly, {item} is still my favourite of all the sports I've tried, I keep going back to it.",
            "Can't stop thinking about {item}. Of all the sports I've tried, it's the one I keep going back to.",
        ],
        try_replies: &[
            "{Item}, {p}? I can't picture it! Are you going back?",
            "Good for you, {p}. Is {item} hard to pick up?",
            "Ha, {item}! You never stop surprising me, {p}.",
        ],
        repeat_replies: REPEAT_REPLIES,
    },
    Kind {
        name: "instruments",
        question: "Which instruments has {p} played?",
        items: &[
            "ukulele", "cello", "banjo", "piano", "violin", "saxophone", "clarinet", "mandolin", "flute", "harmonica",
            "trumpet", "accordion",
        ],
        tries: &[
            "I had my first {item} lesson today, a proper instrument at last, and my fingers are killing me.",
            "Bought a secondhand {item} online, a new instrument to teach myself from videos.",
            "Signed up for {item} lessons at the community centre and played it for the first time tonight.",
            "My neighbour lent me an old {item} and I played my first tune on it this evening.",
        ],
        repeats: &[
            "Still can't put the {item} down. Of all the instruments I've played it's the one I love most.",
            "Honestly, the {item} is still my favourite of all the instruments I've played, I love it most.",
            "Can't get enough of the {item}. Of all the instruments I've played, it's the one I love most.",
        ],
        try_replies: &[
            "The {item}, {p}? I'd love to hear you play!",
            "Good for you, {p}. Is the {item} hard to learn?",
            "Ha, a {item}! The neighbours will love you, {p}.",
        ],
        repeat_replies: REPEAT_REPLIES,
    },
    Kind {
        name: "cuisines",
        question: "Which cuisines has {p} tried?",
        items: &[
            "Ethiopian", "Peruvian", "Georgian", "Lebanese", "Vietnamese", "Sri Lankan", "Burmese", "Malaysian", "Filipino",
            "Moroccan", "Korean", "Turkish",
        ],
        tries: &[
            "We tried {item} food for the first time tonight, I'm still full.",
            "Had lunch at a little {item} restaurant near work today, what a cuisine.",
            "Cooked my first {item} dish tonight, a whole new cuisine for me.",
            "A colleague took me out for {item} at lunchtime, first time I've tried it and I'm converted.",
        ],
        repeats: &[
            "Craving {item} food again. Of all the cuisines I've tried it's still my favourite.",
            "Honestly, {item} food is still my favourite of all the cuisines I've tried.",
            "I could eat {item} food every day. Of all the cuisines I've tried, it's still my favourite.",
        ],
        try_replies: &[
            "{Item} food, {p}? What did you have?",
            "Ooh, I've never had {item}, {p}. Was it spicy?",
            "You'll have to take me for {item} next time, {p}.",
        ],
        repeat_replies: REPEAT_REPLIES,
    },
    Kind {
        name: "travel",
        question: "Which places has {p} travelled to?",
        items: &[
            "Lisbon", "Kyoto", "Reykjavik", "Edinburgh", "Vancouver", "Marrakech", "Prague", "Cape Town", "Copenhagen",
            "Buenos Aires", "Istanbul", "Hanoi",
        ],
        tries: &[
            "Just back from travelling to {item}, four days of walking and my feet are destroyed.",
            "Landed home from {item} last night, the best travel I've done in ages.",
            "Travelled to {item} for the long weekend and I didn't want to leave.",
            "Home from a week of travel around {item}, I could have stayed a month.",
        ],
        repeats: &[
            "Looking at my photos from {item} again. Of all the places I've travelled to, it's still the best.",
            "Honestly, {item} is still the best of all the places I've travelled to.",
            "I keep dreaming about {item}. Of all the places I've travelled to it's still the best.",
        ],
        try_replies: &[
            "{Item}, {p}? I'm so jealous! Send me photos.",
            "How was the weather in {item}, {p}?",
            "I've always wanted to see {item}, {p}. Was it busy?",
        ],
        repeat_replies: REPEAT_REPLIES,
    },
    Kind {
        name: "crafts",
        question: "Which crafts has {p} taken up?",
        items: &[
            "pottery", "knitting", "woodworking", "calligraphy", "embroidery", "candle making", "bookbinding",
            "watercolour painting", "stained glass", "leatherwork", "quilting", "origami",
        ],
        tries: &[
            "Went to a {item} workshop this afternoon, my first go at the craft.",
            "Started {item} this week with a kit from the craft shop.",
            "Spent my whole Sunday on {item}, a new craft for me.",
            "Joined an evening class in {item} at the craft centre, it's harder than it looks.",
        ],
        repeats: &[
            "Still hooked on {item}. Of all the crafts I've taken up it's the one that stuck.",
            "Honestly, {item} is the one that stuck, of all the crafts I've taken up.",
            "I can't stop thinking about {item}. Of all the crafts I've taken up, it's the one that stuck.",
        ],
        try_replies: &[
            "{Item}, {p}? Show me what you made!",
            "That's a lovely thing to learn, {p}. Is {item} fiddly?",
            "Ha, {item}! I can't wait for my handmade present, {p}.",
        ],
        repeat_replies: REPEAT_REPLIES,
    },
    Kind {
        name: "languages",
        question: "Which languages has {p} studied?",
        items: &[
            "Italian", "Japanese", "Portuguese", "Greek", "Swahili", "Dutch", "Polish", "Mandarin", "Arabic", "Hindi",
            "Welsh", "Icelandic",
        ],
        tries: &[
            "Started learning {item} with an app this week, ask me how to order a coffee in my new language.",
            "Had my first {item} class tonight, what a language, the grammar is brutal.",
            "Signed up for an evening language course in {item}, the first lesson was today.",
            "Bought a beginners' {item} textbook and did my first language exercises on the train.",
        ],
        repeats: &[
            "Still loving my {item}. Of all the languages I've studied it's the one I enjoy most.",
            "Honestly, {item} is still my favourite of all the languages I've studied, I enjoy it most.",
            "Can't get enough of {item}. Of all the languages I've studied, it's the one I enjoy most.",
        ],
        try_replies: &[
            "{Item}, {p}? Say something to me in it!",
            "Good for you, {p}. Is {item} hard?",
            "Ha, {item}! Very ambitious, {p}.",
        ],
        repeat_replies: REPEAT_REPLIES,
    },
    Kind {
        name: "board games",
        question: "Which board games has {p} played?",
        items: &[
            "chess", "Scrabble", "backgammon", "mahjong", "Catan", "Carcassonne", "Ticket to Ride", "Dixit", "Azul",
            "dominoes", "cribbage", "Wingspan",
        ],
        tries: &[
            "Played {item} for the first time at a friend's place tonight, I lost badly.",
            "Our games night this week was {item}, I finally learned the rules.",
            "Someone taught me {item} at the pub on Friday, I'm hooked on the game already.",
            "My nephew taught me {item} on Sunday, a brilliant game, and I lost three times.",
        ],
        repeats: &[
            "I could play {item} every night. Of all the board games I've played it's still the best.",
            "Honestly, {item} is still the best of all the board games I've played.",
            "Can't get enough of {item}. Of all the board games I've played, it's still the best.",
        ],
        try_replies: &[
            "{Item}, {p}? I'll challenge you next time!",
            "Did you win at {item}, {p}?",
            "Ha, {item}! You're so competitive, {p}.",
        ],
        repeat_replies: REPEAT_REPLIES,
    },
];

/// A one-off activity: how the person tells it, the other's reply (the
/// person's name and the topic), and the question's verb phrase.
const EVENTS: &[(&str, &str, &str)] = &[
    (
        "I finally ran my first half marathon this morning, my legs are jelly!",
        "Nice one, {p}! How did the half marathon feel at the finish?",
        "run a half marathon",
    ),
    (
        "We drove up to the lake yesterday and went kayaking all afternoon.",
        "Kayaking on the lake sounds perfect, {p}. Did anyone fall in?",
        "go kayaking on the lake",
    ),
    ("I passed my driving test today, first attempt!", "Congratulations on the driving test, {p}! Where are you driving first?", "pass a driving test"),
    ("I got my first tattoo this afternoon, a little fern on my wrist.", "A fern tattoo, {p}? Send me a picture!", "get a tattoo"),
    (
        "Went to see a jazz quartet at the old theatre last night, goosebumps the whole time.",
        "Jazz at the old theatre, {p}? So jealous. Was the quartet good?",
        "see a jazz concert",
    ),
    (
        "I gave a speech at my cousin's wedding on Saturday, my hands were shaking.",
        "A wedding speech, {p}! I bet the whole room loved it.",
        "give a wedding speech",
    ),
    (
        "I donated blood for the first time today, they gave me a sticker and a juice.",
        "Donating blood is brilliant, {p}. Did you feel faint afterwards?",
        "donate blood",
    ),
    (
        "I did a tandem skydive this morning and screamed the whole way down.",
        "A skydive, {p}?! You're braver than me. How high was the jump?",
        "go skydiving",
    ),
    (
        "We went up in a hot air balloon at sunrise today, the fields looked tiny.",
        "A hot air balloon at sunrise, {p}? That sounds magical.",
        "ride in a hot air balloon",
    ),
    ("We finally beat an escape room last night, with two minutes to spare.", "Two minutes to spare, {p}! Which escape room was it?", "beat an escape room"),
    (
        "I spent today volunteering at the food bank, six hours of sorting tins.",
        "Good on you, {p}. Is the food bank short of helpers?",
        "volunteer at the food bank",
    ),
    ("Painted the whole living room yesterday, it's a deep green now.", "Deep green, {p}? Bold! How long did the living room take?", "paint the living room"),
    ("Picked up my first pair of glasses today, everything is so sharp.", "New glasses, {p}! Can you read the road signs now?", "get glasses"),
    (
        "Hosted my first big dinner party last night, twelve people and one oven.",
        "Twelve people and one oven, {p}? How did the dinner party go?",
        "host a dinner party",
    ),
    ("Went to a stand-up comedy night on Friday and laughed until I cried.", "Stand-up comedy, {p}? Who was on?", "go to a comedy night"),
    (
        "We saw the northern lights last night, green ribbons right over the house!",
        "The northern lights, {p}? That's a bucket-list thing!",
        "see the northern lights",
    ),
    (
        "I got my first-aid certificate today after a weekend course.",
        "A first-aid certificate is so useful, {p}. Did you practise on a dummy?",
        "get a first-aid certificate",
    ),
    ("I gave a talk at a conference today, two hundred people in the room.", "Two hundred people, {p}! How did the talk go?", "give a conference talk"),
    ("Went whale watching off the coast this morning and saw a humpback!", "A humpback, {p}? Whale watching is on my list.", "go whale watching"),
    ("Just back from a three-day music festival, I've completely lost my voice.", "A whole music festival, {p}! Did you camp?", "go to a music festival"),
    (
        "Had my knee operation this morning, I'm on crutches for a few weeks.",
        "Oh no, {p}, rest that knee! How did the operation go?",
        "have a knee operation",
    ),
    (
        "We went strawberry picking at a farm today and came home with four kilos.",
        "Four kilos of strawberries, {p}? Jam time!",
        "go strawberry picking",
    ),
    ("Saw my first opera tonight, three hours and I loved every minute.", "Your first opera, {p}! Which one did you see?", "see an opera"),
    ("Our team won the pub quiz last night, first time ever!", "Winning the pub quiz, {p}! What was the prize?", "win a pub quiz"),
    (
        "I ran a bake sale at work today and raised three hundred for charity.",
        "Three hundred from a bake sale, {p}? What did you bake?",
        "run a bake sale",
    ),
    (
        "Took a helicopter tour over the bay today, I couldn't stop grinning.",
        "A helicopter tour, {p}? Was the bay as pretty from up there?",
        "take a helicopter tour",
    ),
    (
        "Climbed all four hundred steps of the cathedral tower today.",
        "Four hundred steps, {p}? How was the view from the tower?",
        "climb the cathedral tower",
    ),
    ("Got my ears pierced this afternoon, finally!", "Pierced ears, {p}! Which earrings did you pick?", "get their ears pierced"),
    (
        "I went on my first yoga retreat this weekend, two whole days of silence.",
        "A silent yoga retreat, {p}? I'd last an hour!",
        "go on a yoga retreat",
    ),
];

/// Fact types stated once.
const FACTS: &[&str] = &["pet", "sibling", "job", "partner", "hometown", "allergy", "car", "child", "birthday"];

const PET_NAMES: &[&str] =
    &["Biscuit", "Maple", "Rufus", "Pepper", "Juno", "Miso", "Olive", "Tofu", "Ziggy", "Clover", "Pickle", "Nacho", "Waffles", "Bean"];
const SIBLING_CITIES: &[&str] = &[
    "Glasgow", "Dublin", "Melbourne", "Toronto", "Berlin", "Wellington", "Montreal", "Singapore", "Nairobi", "Oslo", "Seville",
    "Chicago",
];
/// A job and how the person talks about it without naming it.
const JOBS: &[(&str, &str)] = &[
    ("nurse", "Twelve-hour shifts on the children's ward are killing my feet."),
    ("teacher", "Thirty essays to mark tonight, and my year nines still never use full stops."),
    ("chef", "Saturday nights running a restaurant kitchen are pure chaos, two burns already this month."),
    ("architect", "The client wants the floor plans redrawn again, third version of the same building."),
    ("vet", "Half the patients at my clinic are dogs who swallowed socks."),
    ("firefighter", "Night shifts at the fire station mean I sleep through half the day."),
    ("pilot", "Long-haul rotations in the cockpit mean I never know which time zone I'm in."),
    ("accountant", "Tax season at the firm means I'm buried in spreadsheets until April."),
    ("electrician", "Rewiring old houses all day means I spend half my life crawling around lofts."),
    ("librarian", "The kids' reading hour at the library is the best part of my week."),
    ("dentist", "Three fillings and a root canal before lunch, my patients are braver than me."),
    ("journalist", "My editor cuts every article I file in half, the joys of the newsroom."),
];
const PARTNERS: &[&str] = &["Alex", "Jordan", "Robin", "Kai", "Morgan", "Jamie", "Rowan", "Charlie", "Avery", "Quinn"];
const HOMETOWNS: &[&str] = &["Whitby", "Galway", "Porto", "Hobart", "Dunedin", "Halifax", "Kinsale", "Falmouth", "Tobermory", "Aberdovey"];
const ALLERGENS: &[&str] = &["peanuts", "prawns", "cashews", "kiwis", "sesame seeds", "walnuts"];
const CARS: &[&str] =
    &["Volvo estate", "Fiat Panda", "Honda Civic", "Mini Cooper", "Ford Fiesta", "Toyota Yaris", "Skoda Octavia", "Citroen Berlingo"];
/// Four sons' names, then four daughters'.
const CHILDREN: &[&str] = &["Oscar", "Milo", "Arlo", "Otis", "Ivy", "Ruby", "Elsie", "Nell"];

/// A trait: the question it answers and three ways to state it, none using
/// the question's words.
const TRAITS: &[(&str, [&str; 3])] = &[
    (
        "Would {p} enjoy a hiking holiday?",
        [
            "Nothing beats a weekend up in the mountains, I come back a new person.",
            "I'd rather sleep in a tent under the stars than in any fancy hotel.",
            "Give me fresh air and a muddy trail over a shopping centre any day.",
        ],
    ),
    (
        "Would {p} like a big surprise party?",
        [
            "Crowds wear me out, after any busy event I need a whole day alone to recover.",
            "My perfect Saturday night is a book, a blanket and absolutely nobody else.",
            "I always slip out of gatherings early, too many people at once drains me.",
        ],
    ),
    (
        "Would {p} want to volunteer at an animal shelter?",
        [
            "I stop to say hello to every dog I pass, it makes my day.",
            "If I had a bigger flat I'd fill it with rescue cats and dogs.",
            "Wildlife documentaries are my happy place, I cried at the one about elephants.",
        ],
    ),
    (
        "Would {p} enjoy a pastry course?",
        [
            "I bake something every Sunday, the flat smells of cinnamon all day.",
            "My sourdough finally has a proper crust, I've been feeding that starter for months.",
            "Nothing makes me happier than pulling a tray of croissants out of the oven.",
        ],
    ),
    (
        "Would {p} be happy working an early morning shift?",
        [
            "I'm useless before ten, my brain only wakes up around noon.",
            "My best ideas always arrive at two in the small hours.",
            "Alarms before eight should be illegal, honestly.",
        ],
    ),
    (
        "Would {p} happily book a long-haul flight?",
        [
            "Planes terrify me, I grip the armrest from take-off to landing.",
            "I'd choose a twelve-hour train over getting on a plane any day.",
            "Turbulence is my worst nightmare, I can't even watch films set on planes.",
        ],
    ),
    (
        "Would {p} enjoy a hot wings challenge?",
        [
            "I put chilli on everything, even my breakfast eggs.",
            "The fierier the curry the happier I am, mild is pointless.",
            "I grow scotch bonnets on the windowsill because shop ones aren't fiery enough.",
        ],
    ),
    (
        "Would {p} enjoy a tour of old castles?",
        [
            "I could read about medieval sieges all night, honestly.",
            "Ancient ruins give me chills, imagining who walked there centuries ago.",
            "Museums full of armour and maps could keep me busy for days.",
        ],
    ),
    (
        "Would {p} like a seaside holiday?",
        [
            "The sound of waves is the only thing that properly calms me down.",
            "I'd live on a boat if I could, salt water in my hair every day.",
            "Whenever I'm stressed I drive to the coast and just stare at the water.",
        ],
    ),
    (
        "Would {p} enjoy a ski trip?",
        [
            "Anything below ten degrees and I'm miserable, I wear two jumpers indoors.",
            "Winter is just a season to survive for me, I hibernate until the spring.",
            "Snow looks nice on postcards, in real life it's wet and freezing and I hate it.",
        ],
    ),
    (
        "Would {p} want the latest smartphone?",
        [
            "I always pre-order new gadgets the minute they're announced.",
            "I build my own computers, there are three of them humming in my spare room.",
            "I've read every gadget review on the internet, twice.",
        ],
    ),
    (
        "Would {p} like a voucher for a plant nursery?",
        [
            "My tomatoes are finally going red, I check on them every single morning.",
            "I spend every spare hour out back with my roses and my compost heap.",
            "Seed catalogues are my favourite reading, I circle everything.",
        ],
    ),
    (
        "Would {p} enjoy joining a book club?",
        [
            "I'm halfway through three novels at once, I read on the bus, in the bath, everywhere.",
            "My shelves are overflowing, there are novels stacked on the floor now.",
            "Nothing beats a rainy afternoon with a long story and a pot of tea.",
        ],
    ),
];
const TRAIT_REPLIES: &[&str] =
    &["Ha, that's so you, {p}.", "I know, {p}, you've said that before!", "Fair enough, {p}.", "That doesn't surprise me one bit, {p}."];

/// Chit-chat: a line and the other's reply. `{other}` is the person spoken
/// to, `{month}` the session's month, `{later}` a month a few ahead,
/// `{season}` the session's season.
const FILLER: &[(&str, &str)] = &[
    ("How's work treating you, {other}?", "Busy as ever, {other}. Too many meetings and not enough coffee."),
    ("Any plans for the holidays?", "Nothing fixed yet. Maybe a quiet holiday at home this time."),
    ("I really need a proper holiday, somewhere warm.", "Same here. Let's both book something before {later}."),
    ("Have you eaten yet? I'm starving.", "Not yet, I'm thinking noodles tonight. Food is all I think about after work."),
    ("My mum keeps asking when I'm visiting.", "Mums are like that. Mine calls every Sunday to check I'm eating properly."),
    ("Can't believe it's {month} already.", "I know, this year is flying by."),
    ("We should plan something fun for {later}.", "Yes! Put it in the calendar before we both forget, {other}."),
    ("Did you watch the match last night?", "No, I'm not much of a sports person, you know that."),
    ("What's the name of that café you mentioned, {other}?", "I can never remember names. The one with the green door."),
    ("Where does your cousin live these days?", "Still out in the suburbs, miles from anywhere."),
    ("Any news from the family?", "Everyone's fine. My brother and sister are arguing about a holiday again."),
    ("What's everyone doing for birthdays this year?", "Small dinners, nothing big. Nobody wants a party."),
    ("I'd love to learn another language one day.", "Me too, but I never find the time."),
    ("Do you think I should take up a new sport?", "Sure, anything that gets you moving, {other}."),
    ("I keep meaning to travel more.", "Travelling is so expensive though. Maybe somewhere close first."),
    ("Got any good recipes? I'm bored of my own cooking.", "Pick a cuisine you don't know and start there, that's what I'd do."),
    ("Is it just me or is everything more expensive this year?", "It's not just you. My food shop costs a fortune now."),
    ("How's the weather where you are?", "Grey and drizzly, the usual for {month}."),
    ("I've been wondering what to do this {season}.", "Plans already? You're so organised, {other}."),
    ("Remember when we said we'd go hiking together?", "Ha, we say that every spring and never go."),
    ("Work wants me at a conference in {later}.", "Free travel is free travel, {other}!"),
    ("What music are you into at the moment?", "Whatever's on the radio, I'm not fussy."),
    ("I need a hobby that isn't scrolling on my phone.", "Pick something with your hands, it helps you switch off."),
    ("Are you still up for dinner next week?", "Definitely, you pick the place this time, {other}."),
    ("The dog next door barks all night.", "Ugh. Have you tried talking to the neighbours?"),
    ("How's the family doing, {other}?", "All good, everyone's keeping busy."),
    ("I swear every weekend goes by faster than the last.", "Tell me about it. Monday always comes too soon."),
    ("What did you think of that film everyone's talking about?", "Haven't seen it yet, no spoilers please!"),
    ("Any big plans for the year?", "A few. Mostly I just want a calmer year than last year."),
    ("Do you ever miss living at home?", "Sometimes, mostly the food."),
    ("I'm trying to eat healthier this month.", "Good luck! I last about a week every time."),
    ("Have you booked anything for {later} yet?", "Not yet, prices are silly right now."),
    ("Which day works best for a call next week?", "Thursday evening is good for me, {other}."),
    ("My boss wants me to work this weekend.", "Again? Tell them you have plans, {other}."),
    ("I should really get back into playing something.", "You always say that, {other}!"),
    ("I'm thinking of going somewhere new for a holiday in {later}.", "Ooh, where? Somewhere with a beach, I hope."),
    ("Know any good places to eat near the station?", "There's a decent noodle bar, nothing fancy."),
    ("Is {season} your favourite time of year?", "Not really, I'm more of an autumn person."),
    ("Do you have a name for your new plant yet?", "Not yet, any ideas, {other}?"),
    ("Where would you live if you could live anywhere?", "Somewhere by the water, with a big kitchen."),
];
const GREETINGS: &[(&str, &str)] = &[
    ("Hey {other}! How have you been?", "Hi {other}! Busy, but good. It's been a few weeks!"),
    ("Morning {other}!", "Morning! Got a minute to chat?"),
    ("{other}! It's been ages.", "I know, sorry, {month} has been hectic."),
    ("Hi {other}, are you free for a quick catch-up?", "Always, {other}. What's new?"),
];
const FAREWELLS: &[(&str, &str)] = &[
    ("Anyway, I should go. Talk soon, {other}!", "Bye {other}, take care!"),
    ("I have to run, speak next week?", "Sounds good. Bye {other}!"),
    ("Right, dinner's calling. Catch you later, {other}.", "Enjoy it! Speak soon."),
];
/// Hands the word to the other speaker before their news.
const BRIDGES: &[&str] = &[
    "What about you, {other}? Anything new?",
    "Anyway, enough about me. What's new with you, {other}?",
    "How about you, {other}, any news?",
    "Your turn, {other}. What's been happening?",
];

const NUMBERS: [&str; 7] = ["zero", "one", "two", "three", "four", "five", "six"];

// ---------------------------------------------------------------- generator

fn cap(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// A planted statement before it has a place in a session.
struct Unit {
    person: usize,
    plant: Plant,
    says: String,
    reply: String,
    label: String,
}

/// Places planted statements in sessions: never in a session of `taken`,
/// at most `CAP` per session, the emptier of two random candidates.
struct Placer {
    load: Vec<usize>,
    units: Vec<Vec<Unit>>,
}

impl Placer {
    fn place(&mut self, rng: &mut Rng, unit: Unit, allowed: impl Fn(usize) -> bool) -> Option<usize> {
        let cands: Vec<usize> = (0..self.load.len()).filter(|s| allowed(*s) && self.load[*s] < CAP).collect();
        if cands.is_empty() {
            return None;
        }
        let a = *rng.pick(&cands);
        let b = *rng.pick(&cands);
        let s = if self.load[b] < self.load[a] { b } else { a };
        self.load[s] += 1;
        self.units[s].push(unit);
        Some(s)
    }
}

fn fact(kind: &str, who: usize, p: &str, rng: &mut Rng, picks: &[usize; 2]) -> (String, String, String) {
    let i = picks[who];
    match kind {
        "pet" => {
            let species = *rng.pick(&["dog", "cat"]);
            let v = PET_NAMES[i % PET_NAMES.len()];
            let says = if rng.chance(0.5) {
                format!("My {species} {v} got into the bin again while I was out, there was rubbish everywhere.")
            } else {
                format!("{v}, my {species}, has started waking me up at five every morning.")
            };
            (format!("What is the name of {p}'s {species}?"), says, format!("Ha, classic {v}! Cheeky thing, {p}."))
        }
        "sibling" => {
            let sib = *rng.pick(&["sister", "brother"]);
            let v = SIBLING_CITIES[i % SIBLING_CITIES.len()];
            let says = if rng.chance(0.5) {
                format!("My {sib} has been in {v} for five years now, I really should visit more.")
            } else {
                format!("My {sib} just signed the lease on a flat in {v}, right by the river.")
            };
            (format!("Where does {p}'s {sib} live?"), says, format!("{v} is a long way, {p}. Do you see each other much?"))
        }
        "job" => {
            let (_, says) = JOBS[i % JOBS.len()];
            (format!("What does {p} do for a living?"), says.to_string(), format!("That sounds exhausting, {p}. I don't know how you do it."))
        }
        "partner" => {
            let v = PARTNERS[i % PARTNERS.len()];
            let says = if rng.chance(0.5) {
                format!("{v} and I have been together six years this week, where does the time go?")
            } else {
                format!("My partner {v} is away for work all week and the flat feels empty.")
            };
            (format!("What is the name of {p}'s partner?"), says, format!("Say hi to {v} from me, {p}!"))
        }
        "hometown" => {
            let v = HOMETOWNS[i % HOMETOWNS.len()];
            let says = if rng.chance(0.5) {
                format!("I miss {v} sometimes, the whole town smelled of the sea when I was a kid.")
            } else {
                format!("I grew up in {v}, a tiny harbour town where everyone knew your business.")
            };
            (format!("Where did {p} grow up?"), says, format!("{v} sounds like a lovely place to be a kid, {p}."))
        }
        "allergy" => {
            let v = ALLERGENS[i % ALLERGENS.len()];
            let says = format!("Had to send a dish back at lunch, it had {v} in it and {v} make my throat close up.");
            (format!("What is {p} allergic to?"), says, format!("That's scary, {p}. Always ask the waiter first."))
        }
        "car" => {
            let v = CARS[i % CARS.len()];
            let says = format!("My old {v} wouldn't start again this morning, I had to get a jump from the neighbour.");
            (format!("What car does {p} drive?"), says, format!("Maybe it's time to retire the {v}, {p}."))
        }
        "child" => {
            let v = CHILDREN[i % CHILDREN.len()];
            let kid = if i % CHILDREN.len() < 4 { "son" } else { "daughter" };
            let says = format!("My {kid} {v} is obsessed with dinosaurs, every sentence starts with 'did you know'.");
            (format!("What is the name of {p}'s {kid}?"), says, format!("Ha, {v} sounds brilliant, {p}."))
        }
        "birthday" => {
            let m = MONTHS[i % 12];
            let d = rng.range(2, 28);
            let says = format!("Don't forget my birthday is on the {d}{} of {m}, I expect cake.", ordinal(d));
            (format!("When is {p}'s birthday?"), says, format!("As if I'd forget, {p}! Cake is noted."))
        }
        _ => unreachable!("fact type {kind}"),
    }
}

fn ordinal(d: usize) -> &'static str {
    match (d % 10, d % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    }
}

/// Generates conversation `id` from `seed`.
pub fn conversation(seed: u64, id: usize) -> Conversation {
    let mut rng = Rng::new(seed ^ 0x5EED_B00C_0000_0000 ^ (id as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407));
    let rng = &mut rng;
    let people = {
        let p = rng.pick_n(NAMES, 2);
        [p[0], p[1]]
    };
    let n = rng.range(18, 24);
    let mut placer = Placer { load: vec![0; n], units: (0..n).map(|_| Vec::new()).collect() };

    // Things tried: per person 4 kinds, 3-4 items each in different
    // sessions; the favourite comes back in later sessions (1-3 times for
    // one kind, once for the others).
    let kinds: [Vec<usize>; 2] = [0, 1].map(|_| rng.pick_n(&(0..KINDS.len()).collect::<Vec<_>>(), 4));
    let item_order: Vec<Vec<&str>> = KINDS.iter().map(|k| rng.pick_n(k.items, k.items.len())).collect();
    for who in 0..2 {
        let p = people[who];
        let again = rng.range(0, 3);
        for (ki, &k) in kinds[who].iter().enumerate() {
            let kind = &KINDS[k];
            let count = rng.range(3, 4);
            let skip = if who == 0 { 0 } else { 4 };
            let items = &item_order[k][skip..skip + count];
            let mut used: Vec<usize> = Vec::new();
            let mut firsts: Vec<(usize, &str)> = Vec::new();
            // Each first try in its own words: tries told alike would be
            // near-duplicates of each other.
            let told = rng.pick_n(kind.tries, count);
            for (item, template) in items.iter().zip(told) {
                let says = template.replace("{item}", item);
                let reply = rng.pick(kind.try_replies).replace("{Item}", &cap(item)).replace("{item}", item).replace("{p}", p);
                let unit = Unit { person: who, plant: Plant::Try, says, reply, label: format!("{}:{item}", kind.name) };
                let s = placer.place(rng, unit, |s| !used.contains(&s)).expect("room for a try");
                used.push(s);
                firsts.push((s, item));
            }
            let early: Vec<&(usize, &str)> = firsts.iter().filter(|(s, _)| *s + 3 < n).collect();
            let &(fav_s, fav) = if early.is_empty() { firsts.iter().min().unwrap() } else { *rng.pick(&early) };
            let repeats = if ki == again { rng.range(2, 3) } else { 1 };
            let mut texts = rng.pick_n(kind.repeats, kind.repeats.len());
            for _ in 0..repeats {
                let says = texts.pop().unwrap_or(kind.repeats[0]).replace("{item}", fav);
                let reply = rng.pick(kind.repeat_replies).replace("{item}", fav).replace("{p}", p);
                let unit = Unit { person: who, plant: Plant::Repeat, says, reply, label: format!("{}:{fav}", kind.name) };
                if let Some(s) = placer.place(rng, unit, |s| s > fav_s && !used.contains(&s)) {
                    used.push(s);
                }
            }
        }
    }

    // Events: 5-6 per person, distinct, each in its own session.
    let ne = [rng.range(5, 6), rng.range(5, 6)];
    let events = rng.pick_n(EVENTS, ne[0] + ne[1]);
    for (who, &p) in people.iter().enumerate() {
        let mut used: Vec<usize> = Vec::new();
        let mine = if who == 0 { &events[..ne[0]] } else { &events[ne[0]..] };
        for (says, reply, what) in mine {
            let unit = Unit {
                person: who,
                plant: Plant::Event,
                says: says.to_string(),
                reply: reply.replace("{p}", p),
                label: what.to_string(),
            };
            let s = placer.place(rng, unit, |s| !used.contains(&s)).expect("room for an event");
            used.push(s);
        }
    }

    // Traits: 4 per person, each stated in two sessions.
    for (who, &p) in people.iter().enumerate() {
        for t in rng.pick_n(&(0..TRAITS.len()).collect::<Vec<_>>(), 4) {
            let says = rng.pick_n(&TRAITS[t].1, 2);
            let mut used: Vec<usize> = Vec::new();
            for text in says {
                let unit = Unit {
                    person: who,
                    plant: Plant::Trait,
                    says: text.to_string(),
                    reply: rng.pick(TRAIT_REPLIES).replace("{p}", p),
                    label: t.to_string(),
                };
                let s = placer.place(rng, unit, |s| !used.contains(&s)).expect("room for a trait");
                used.push(s);
            }
        }
    }

    // Facts: 4-5 per person; when both have the same type, different values.
    let mut fact_questions: Vec<(usize, String, String)> = Vec::new();
    let picks: Vec<[usize; 2]> = FACTS
        .iter()
        .map(|_| {
            let v = rng.pick_n(&(0..12).collect::<Vec<usize>>(), 2);
            [v[0], v[1]]
        })
        .collect();
    for (who, &p) in people.iter().enumerate() {
        let count = rng.range(4, 5);
        for f in rng.pick_n(FACTS, count) {
            let fi = FACTS.iter().position(|x| *x == f).expect("fact type");
            let (question, says, reply) = fact(f, who, p, rng, &picks[fi]);
            let label = format!("{f}#{}", fact_questions.len());
            fact_questions.push((who, question, label.clone()));
            let unit = Unit { person: who, plant: Plant::Fact, says, reply, label };
            placer.place(rng, unit, |_| true).expect("room for a fact");
        }
    }

    // Sessions: dates, then the turns.
    let mut turns: Vec<Turn> = Vec::new();
    let mut planted: Vec<Planted> = Vec::new();
    let mut day = EPOCH_2023 + rng.range(0, 120) as i64 * DAY;
    for (s, units) in placer.units.into_iter().enumerate() {
        let start = day + rng.range(8, 20) as i64 * 3_600_000 + rng.range(0, 59) as i64 * MINUTE;
        day += rng.range(16, 42) as i64 * DAY;
        let (y, m, _) = civil(start);
        let later = MONTHS[month_of_index(month_index(y, m) + rng.range(2, 4) as i64).1 as usize - 1];
        let month = MONTHS[m as usize - 1];
        let season = season_name(m);
        let first = rng.range(0, 1);
        // One person's news, then the other's.
        let order = if rng.chance(0.5) { [0, 1] } else { [1, 0] };
        let mut units = units;
        for i in (1..units.len()).rev() {
            let j = rng.range(0, i);
            units.swap(i, j);
        }
        units.sort_by_key(|u| order.iter().position(|o| *o == u.person));
        let mut cur = first;
        let mut bridges = 0;
        for u in &units {
            if u.person != cur {
                bridges += 1;
            }
            cur = u.person;
        }
        let required = 2 + 2 * units.len() + bridges + 1;
        let target = rng.range(12, 20).max(required);
        let pairs = (target - required) / 2;
        let long_goodbye = (target - required) % 2 == 1;
        let mut slots = vec![0usize; units.len() + 1];
        for _ in 0..pairs {
            let i = rng.range(0, units.len());
            slots[i] += 1;
        }

        let mut out: Vec<(usize, String)> = Vec::new();
        let fill = |t: &str, to: usize| {
            t.replace("{other}", people[to]).replace("{month}", month).replace("{later}", later).replace("{season}", season)
        };
        let (g, r) = *rng.pick(GREETINGS);
        out.push((first, fill(g, 1 - first)));
        out.push((1 - first, fill(r, first)));
        let mut cur = first;
        let mut used_filler: Vec<usize> = Vec::new();
        for (i, slot) in slots.iter().enumerate() {
            for _ in 0..*slot {
                let mut f = rng.range(0, FILLER.len() - 1);
                while used_filler.contains(&f) {
                    f = rng.range(0, FILLER.len() - 1);
                }
                used_filler.push(f);
                out.push((cur, fill(FILLER[f].0, 1 - cur)));
                out.push((1 - cur, fill(FILLER[f].1, cur)));
            }
            let Some(u) = units.get(i) else { break };
            if u.person != cur {
                out.push((cur, fill(rng.pick::<&str>(BRIDGES), u.person)));
            }
            let key = (s, out.len());
            out.push((u.person, u.says.clone()));
            out.push((1 - u.person, u.reply.clone()));
            planted.push(Planted { plant: u.plant, person: people[u.person], key, reply: (s, key.1 + 1), label: u.label.clone() });
            cur = u.person;
        }
        let (g, r) = *rng.pick(FAREWELLS);
        out.push((cur, fill(g, 1 - cur)));
        if long_goodbye {
            out.push((1 - cur, fill(r, cur)));
        }
        for (i, (who, text)) in out.into_iter().enumerate() {
            turns.push(Turn { session: s, turn: i, speaker: people[who], text, at: start + i as i64 * MINUTE });
        }
    }
    let reference_time = turns.last().expect("turns").at + 10 * DAY;

    // Questions.
    let mut questions: Vec<Question> = Vec::new();
    let keys = |plant: Plant, person: &str, label: &str| -> Vec<(usize, usize)> {
        let mut k: Vec<_> =
            planted.iter().filter(|x| x.plant == plant && x.person == person && x.label == label).map(|x| x.key).collect();
        k.sort();
        k
    };
    for (who, text, label) in &fact_questions {
        let p = people[*who];
        questions.push(Question {
            category: Category::SingleHop,
            text: text.clone(),
            person: p,
            gold: keys(Plant::Fact, p, label),
            interval: None,
            stands_for: Vec::new(),
        });
    }
    for who in 0..2 {
        let p = people[who];
        for &k in &kinds[who] {
            let mut gold: Vec<(usize, usize)> = planted
                .iter()
                .filter(|x| x.plant == Plant::Try && x.person == p && x.label.starts_with(&format!("{}:", KINDS[k].name)))
                .map(|x| x.key)
                .collect();
            gold.sort();
            // A later mention of an item names it as well as its first try.
            let first = |label: &str| planted.iter().find(|x| x.plant == Plant::Try && x.person == p && x.label == label);
            let stands_for = planted
                .iter()
                .filter(|x| x.plant == Plant::Repeat && x.person == p && x.label.starts_with(&format!("{}:", KINDS[k].name)))
                .filter_map(|x| first(&x.label).map(|f| (x.key, f.key)))
                .collect();
            questions.push(Question {
                category: Category::MultiHop,
                text: KINDS[k].question.replace("{p}", p),
                person: p,
                gold,
                interval: None,
                stands_for,
            });
        }
    }
    questions.extend(temporal(rng, people, &planted, &turns, reference_time));
    for p in people {
        let traits: Vec<&str> =
            planted.iter().filter(|x| x.plant == Plant::Trait && x.person == p).map(|x| x.label.as_str()).collect();
        let mut seen: Vec<&str> = Vec::new();
        for t in traits {
            if seen.contains(&t) {
                continue;
            }
            seen.push(t);
            let i: usize = t.parse().expect("trait index");
            questions.push(Question {
                category: Category::OpenDomain,
                text: TRAITS[i].0.replace("{p}", p),
                person: p,
                gold: keys(Plant::Trait, p, t),
                interval: None,
                stands_for: Vec::new(),
            });
        }
    }
    Conversation { id, people, turns, questions, planted, reference_time }
}

/// A candidate interval question: the person, the words, `[from, until)`.
struct Interval {
    who: usize,
    when: String,
    from: i64,
    until: i64,
}

/// The person's activities in `[from, until)`.
fn activities_in(planted: &[Planted], turns: &[Turn], person: &str, from: i64, until: i64) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = planted
        .iter()
        .filter(|x| x.is_activity() && x.person == person)
        .filter(|x| turns.iter().any(|t| t.key() == x.key && t.at >= from && t.at < until))
        .map(|x| x.key)
        .collect();
    out.sort();
    out
}

/// Temporal questions: 6-8 that name an interval holding 1-3 of the
/// person's activities, as varied in form as the sessions allow, and at
/// most half as many "when did" questions about single events.
fn temporal(rng: &mut Rng, people: [&'static str; 2], planted: &[Planted], turns: &[Turn], reference: i64) -> Vec<Question> {
    let first = turns.first().expect("turns").at;
    let (fy, fm, _) = civil(first);
    let (ry, rm, _) = civil(reference);
    let (f0, r0) = (month_index(fy, fm), month_index(ry, rm));
    // Candidates by form: month, first week, season, months ago, last year.
    let mut forms: Vec<Vec<Interval>> = (0..5).map(|_| Vec::new()).collect();
    for who in 0..2 {
        for i in f0..r0 {
            let (y, m) = month_of_index(i);
            let (from, until) = months(i, 1);
            let name = MONTHS[m as usize - 1];
            forms[0].push(Interval { who, when: format!("in {name} {y}"), from, until });
            forms[1].push(Interval { who, when: format!("in the first week of {name} {y}"), from, until: ms(y, m, 8) });
            if matches!(m, 3 | 6 | 9) && i + 3 <= r0 {
                let (from, until) = months(i, 3);
                forms[2].push(Interval { who, when: format!("in {} {y}", season_name(m)), from, until });
            }
            let ago = r0 - i;
            if ago <= 6 {
                let when = if ago == 1 { "last month".to_string() } else { format!("{} months ago", NUMBERS[ago as usize]) };
                forms[3].push(Interval { who, when, from, until });
            }
        }
        let (from, until) = (ms(ry - 1, 1, 1), ms(ry, 1, 1));
        if from >= ms(fy, 1, 1) {
            forms[4].push(Interval { who, when: "last year".to_string(), from, until });
        }
    }
    for f in forms.iter_mut() {
        f.retain(|c| (1..=3).contains(&activities_in(planted, turns, people[c.who], c.from, c.until).len()));
        for i in (1..f.len()).rev() {
            let j = rng.range(0, i);
            f.swap(i, j);
        }
    }
    let target = rng.range(6, 8);
    let mut chosen: Vec<Interval> = Vec::new();
    let mut count = [0usize; 2];
    let mut form_order: Vec<usize> = (0..5).collect();
    for i in (1..5).rev() {
        let j = rng.range(0, i);
        form_order.swap(i, j);
    }
    'rounds: loop {
        let mut progress = false;
        for &f in &form_order {
            if chosen.len() >= target {
                break 'rounds;
            }
            let want = if count[0] <= count[1] { 0 } else { 1 };
            let fresh = |c: &Interval| !chosen.iter().any(|x| x.who == c.who && x.from == c.from && x.until == c.until);
            let pos = forms[f].iter().position(|c| c.who == want && fresh(c)).or_else(|| forms[f].iter().position(&fresh));
            if let Some(p) = pos {
                let c = forms[f].remove(p);
                count[c.who] += 1;
                chosen.push(c);
                progress = true;
            }
        }
        if !progress {
            break;
        }
    }
    let mut out: Vec<Question> = chosen
        .into_iter()
        .map(|c| {
            let p = people[c.who];
            let text = if rng.chance(0.7) { format!("What did {p} do {}?", c.when) } else { format!("What was {p} up to {}?", c.when) };
            Question {
                category: Category::Temporal,
                text,
                person: p,
                gold: activities_in(planted, turns, p, c.from, c.until),
                interval: Some((c.from, c.until)),
                stands_for: Vec::new(),
            }
        })
        .collect();
    let events: Vec<&Planted> = planted.iter().filter(|x| x.plant == Plant::Event).collect();
    let whens = rng.range(2, 3).min(out.len() / 2);
    for e in rng.pick_n(&events, whens) {
        out.push(Question {
            category: Category::Temporal,
            text: format!("When did {} {}?", e.person, e.label),
            person: e.person,
            gold: vec![e.key],
            interval: None,
            stands_for: Vec::new(),
        });
    }
    out
}

/// The whole dataset.
pub fn dataset(seed: u64, conversations: usize) -> Vec<Conversation> {
    (0..conversations).map(|i| conversation(seed, i)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn set() -> Vec<Conversation> {
        dataset(20260101, 12)
    }

    #[test]
    fn the_calendar_agrees_with_known_dates() {
        assert_eq!(ms(2023, 1, 1), EPOCH_2023);
        assert_eq!(ms(2024, 3, 1), 1_709_251_200_000);
        assert_eq!(civil(1_709_251_200_000 - 1), (2024, 2, 29));
        for d in [-1000i64, 0, 19_000, 20_000, 20_500] {
            let (y, m, dd) = civil(d * DAY + 5);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
        // "two months ago" on 2024-01-15 is November 2023.
        let r = month_index(2024, 1);
        assert_eq!(months(r - 2, 1), (ms(2023, 11, 1), ms(2023, 12, 1)));
        assert_eq!(ordinal(1), "st");
        assert_eq!(ordinal(12), "th");
        assert_eq!(ordinal(22), "nd");
    }

    #[test]
    fn the_dataset_is_deterministic() {
        let a = dataset(7, 5);
        let b = dataset(7, 5);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.people, y.people);
            assert_eq!(x.reference_time, y.reference_time);
            assert_eq!(x.turns.len(), y.turns.len());
            assert!(x.turns.iter().zip(&y.turns).all(|(s, t)| s.text == t.text && s.at == t.at && s.speaker == t.speaker));
            assert_eq!(x.questions.len(), y.questions.len());
            assert!(x.questions.iter().zip(&y.questions).all(|(p, q)| p.text == q.text && p.gold == q.gold));
        }
        let c = dataset(8, 5);
        assert!(a.iter().zip(&c).any(|(x, y)| x.turns[0].text != y.turns[0].text || x.people != y.people));
    }

    #[test]
    fn sessions_have_the_documented_shape() {
        for c in set() {
            assert_ne!(c.people[0], c.people[1]);
            let n = c.sessions();
            assert!((18..=24).contains(&n), "{n} sessions");
            let mut starts = Vec::new();
            for s in 0..n {
                let ts: Vec<&Turn> = c.turns.iter().filter(|t| t.session == s).collect();
                assert!((12..=20).contains(&ts.len()), "session {s} has {} turns", ts.len());
                for (i, t) in ts.iter().enumerate() {
                    assert_eq!(t.turn, i);
                    assert!(c.people.contains(&t.speaker));
                    if i > 0 {
                        assert_ne!(t.speaker, ts[i - 1].speaker, "speakers alternate");
                        assert_eq!(t.at - ts[i - 1].at, MINUTE);
                    }
                    assert_eq!(civil(t.at).2, civil(ts[0].at).2, "a session is within a day");
                }
                starts.push(ts[0].at);
            }
            for w in starts.windows(2) {
                let gap = (w[1] - w[0]) as f64 / DAY as f64;
                assert!((14.0..=43.0).contains(&gap), "gap {gap} days");
            }
            let mut per_month = std::collections::BTreeMap::new();
            for s in &starts {
                let (y, m, _) = civil(*s);
                *per_month.entry((y, m)).or_insert(0) += 1;
            }
            assert!(per_month.values().all(|n| *n <= 2));
            let span = (starts[n - 1] - starts[0]) / DAY;
            assert!((365..=1000).contains(&span), "span {span} days");
            assert!(c.reference_time > c.turns.last().unwrap().at);
        }
    }

    #[test]
    fn gold_turns_exist_and_are_spoken_by_the_person_asked_about() {
        for c in set() {
            for q in &c.questions {
                assert!(!q.gold.is_empty(), "{}", q.text);
                assert!(q.text.contains(q.person), "{}", q.text);
                assert!(c.people.contains(&q.person));
                let distinct: BTreeSet<_> = q.gold.iter().collect();
                assert_eq!(distinct.len(), q.gold.len());
                for g in &q.gold {
                    let t = c.turn(*g).unwrap_or_else(|| panic!("no turn {g:?} for {}", q.text));
                    assert_eq!(t.speaker, q.person, "{}: {}", q.text, t.text);
                }
            }
        }
    }

    #[test]
    fn every_category_has_about_ten_questions_per_conversation() {
        for c in set() {
            for cat in Category::ALL {
                let n = c.questions.iter().filter(|q| q.category == cat).count();
                assert!((8..=12).contains(&n), "c{} {}: {n}", c.id, cat.name());
            }
            let texts: BTreeSet<&str> = c.questions.iter().map(|q| q.text.as_str()).collect();
            assert_eq!(texts.len(), c.questions.len(), "questions are distinct");
        }
    }

    #[test]
    fn temporal_gold_is_exactly_the_persons_activities_in_the_interval() {
        let mut forms = BTreeSet::new();
        for c in set() {
            let temporal: Vec<&Question> = c.questions.iter().filter(|q| q.category == Category::Temporal).collect();
            let named = temporal.iter().filter(|q| q.interval.is_some()).count();
            assert!(3 * named >= 2 * temporal.len(), "c{}: {named} of {} name a time", c.id, temporal.len());
            for q in temporal {
                match q.interval {
                    Some((from, until)) => {
                        assert!(until <= c.reference_time || q.text.contains("ago") || q.text.contains("last"));
                        assert!(until <= ms(civil(c.reference_time).0, civil(c.reference_time).1, 1));
                        assert!((1..=3).contains(&q.gold.len()), "{}", q.text);
                        for g in &q.gold {
                            let at = c.turn(*g).unwrap().at;
                            assert!(at >= from && at < until, "{}", q.text);
                        }
                        let mut expect: Vec<(usize, usize)> = c
                            .planted
                            .iter()
                            .filter(|p| p.is_activity() && p.person == q.person)
                            .map(|p| p.key)
                            .filter(|k| {
                                let at = c.turn(*k).unwrap().at;
                                at >= from && at < until
                            })
                            .collect();
                        expect.sort();
                        assert_eq!(q.gold, expect, "{}", q.text);
                        let form = if q.text.contains("first week") {
                            "week"
                        } else if q.text.contains("ago") || q.text.contains("last month") {
                            "months ago"
                        } else if q.text.contains("last year") {
                            "last year"
                        } else if ["spring", "summer", "autumn"].iter().any(|s| q.text.contains(s)) {
                            "season"
                        } else {
                            "month"
                        };
                        forms.insert(form);
                        // The words name the interval.
                        let (y, m, d) = civil(from);
                        assert_eq!(d, 1);
                        if form == "month" || form == "week" {
                            assert!(q.text.contains(&format!("{} {y}", MONTHS[m as usize - 1])), "{}", q.text);
                        }
                        if form == "week" {
                            assert_eq!(until - from, 7 * DAY);
                        }
                    }
                    None => {
                        assert!(q.text.starts_with("When did"));
                        let p = c.planted.iter().find(|p| p.key == q.gold[0]).unwrap();
                        assert_eq!(p.plant, Plant::Event);
                    }
                }
            }
        }
        for f in ["month", "week", "season", "months ago"] {
            assert!(forms.contains(f), "no {f} question in the set: {forms:?}");
        }
    }

    #[test]
    fn multi_hop_gold_is_each_first_try_and_repeats_come_later() {
        for c in set() {
            for q in c.questions.iter().filter(|q| q.category == Category::MultiHop) {
                assert!((3..=4).contains(&q.gold.len()), "{}", q.text);
                let sessions: BTreeSet<usize> = q.gold.iter().map(|g| g.0).collect();
                assert_eq!(sessions.len(), q.gold.len(), "different sessions: {}", q.text);
                let tries: Vec<&Planted> = c.planted.iter().filter(|p| q.gold.contains(&p.key)).collect();
                assert!(tries.iter().all(|p| p.plant == Plant::Try));
                let labels: BTreeSet<&str> = tries.iter().map(|p| p.label.as_str()).collect();
                assert_eq!(labels.len(), tries.len(), "distinct items");
                // Told in different words, not one template with another item.
                let shapes: BTreeSet<String> = tries
                    .iter()
                    .map(|p| c.turn(p.key).unwrap().text.replace(p.label.split(':').nth(1).unwrap(), "{item}"))
                    .collect();
                assert_eq!(shapes.len(), tries.len(), "{}", q.text);
            }
            for who in c.people {
                let repeats: Vec<&Planted> = c.planted.iter().filter(|p| p.plant == Plant::Repeat && p.person == who).collect();
                assert!(repeats.len() >= 4, "{who} repeats {} times", repeats.len());
                for r in repeats {
                    let first = c.planted.iter().find(|p| p.plant == Plant::Try && p.person == who && p.label == r.label).unwrap();
                    assert!(r.key.0 > first.key.0);
                    let item = r.label.split(':').nth(1).unwrap();
                    assert!(c.turn(r.key).unwrap().text.contains(item));
                }
            }
        }
    }

    #[test]
    fn first_tries_share_a_question_word_and_repeats_share_them_all() {
        let keywords = |q: &Question| -> Vec<String> {
            q.text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| w.len() >= 5 && *w != q.person && *w != "Which")
                .map(|w| w.to_lowercase()[..4].to_string())
                .collect()
        };
        for c in set() {
            for q in c.questions.iter().filter(|q| q.category == Category::MultiHop) {
                let kw = keywords(q);
                assert!(kw.len() >= 2, "{}: {kw:?}", q.text);
                let has = |k: (usize, usize)| {
                    let text = c.turn(k).unwrap().text.to_lowercase();
                    kw.iter().filter(|w| text.contains(w.as_str())).count()
                };
                for g in &q.gold {
                    let n = has(*g);
                    assert!(n >= 1 && n < kw.len(), "{} / {}", q.text, c.turn(*g).unwrap().text);
                }
                let kind = c.planted.iter().find(|p| p.key == q.gold[0]).unwrap().label.split(':').next().unwrap().to_string();
                let repeats = c
                    .planted
                    .iter()
                    .filter(|p| p.plant == Plant::Repeat && p.person == q.person && p.label.starts_with(&format!("{kind}:")));
                for r in repeats {
                    assert_eq!(has(r.key), kw.len(), "{} / {}", q.text, c.turn(r.key).unwrap().text);
                }
            }
        }
    }

    #[test]
    fn the_other_speaker_answers_with_the_name_and_the_topic() {
        for c in set() {
            for p in &c.planted {
                let said = c.turn(p.key).unwrap();
                let reply = c.turn(p.reply).unwrap();
                assert_eq!(said.speaker, p.person);
                assert_ne!(reply.speaker, p.person);
                assert_eq!(p.reply, (p.key.0, p.key.1 + 1));
                if matches!(p.plant, Plant::Event | Plant::Try | Plant::Trait) {
                    assert!(reply.text.contains(p.person), "{}", reply.text);
                }
                if p.plant == Plant::Try {
                    let item = p.label.split(':').nth(1).unwrap();
                    assert!(reply.text.to_lowercase().contains(&item.to_lowercase()), "{}", reply.text);
                }
            }
            for q in c.questions.iter().filter(|q| q.text.starts_with("When did")) {
                let reply = c.turn((q.gold[0].0, q.gold[0].1 + 1)).unwrap();
                assert!(reply.text.contains(q.person));
            }
        }
    }

    #[test]
    fn open_domain_evidence_does_not_use_the_question_words() {
        let words = |s: &str| -> BTreeSet<String> {
            s.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() >= 4).map(|w| w.to_lowercase()).collect()
        };
        for c in set() {
            for q in c.questions.iter().filter(|q| q.category == Category::OpenDomain) {
                assert_eq!(q.gold.len(), 2);
                let mut asked = words(&q.text);
                asked.remove(&q.person.to_lowercase());
                for g in &q.gold {
                    let said = words(&c.turn(*g).unwrap().text);
                    assert!(asked.is_disjoint(&said), "{} / {}", q.text, c.turn(*g).unwrap().text);
                }
            }
        }
    }
}
