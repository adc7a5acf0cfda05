//! The dataset: long multi-session conversations between a user and an
//! assistant, generated from a fixed seed (no files, no network).
//!
//! Each conversation has 8-12 sessions spread over about a year, 10-16
//! turns each. Most turns are chit-chat and help requests on everyday topics
//! (cooking, travel, work, fitness, films, home, money...), written to share
//! the vocabulary of the questions (cities, jobs, family, birthdays, pets,
//! music, trips). Into them go the planted facts, each a user turn followed
//! by an assistant reply that echoes it:
//!
//! - where the user lives, then a move to another city (a later session);
//! - the user's job, then a new one;
//! - a sibling, the city they live in, and (another session) a visit for
//!   their birthday with a gift;
//! - a pet adopted and named;
//! - two personal facts stated in words the question does not use;
//! - three instruments and three trips, each in its own session;
//! - two dated life events in different sessions.
//!
//! Questions, with the turns that answer them (gold evidence):
//!
//! | type | asks | gold |
//! |---|---|---|
//! | `single_session` | the pet's name; the sibling's name | the turn that says it |
//! | `knowledge_update` | the city / job now | the latest turn only |
//! | `temporal` | which event came first; when an event happened | both events; the event |
//! | `multi_session` | how many instruments / trips | all three turns |
//! | `multi_hop` | the city the user flies to for the sibling's birthday | the sibling's city and the visit |
//! | `paraphrase` | a personal fact, in other words | the turn that says it |

/// SplitMix64: small, fast and the same everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() - 1)]
    }
    /// `n` distinct items.
    pub fn pick_n<T: Clone>(&mut self, items: &[T], n: usize) -> Vec<T> {
        let mut idx: Vec<usize> = (0..items.len()).collect();
        for i in 0..n {
            let j = self.range(i, idx.len() - 1);
            idx.swap(i, j);
        }
        idx[..n].iter().map(|&i| items[i].clone()).collect()
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() % 10_000) as f64 / 10_000.0 < p
    }
}

#[derive(Debug, Clone)]
pub struct Turn {
    pub session: usize,
    /// 0-based index within the session.
    pub turn: usize,
    pub speaker: &'static str,
    pub text: String,
    /// Unix ms: the session's date plus a minute per turn.
    pub at: i64,
}

impl Turn {
    pub fn key(&self) -> (usize, usize) {
        (self.session, self.turn)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum QType {
    SingleSession,
    KnowledgeUpdate,
    Temporal,
    MultiSession,
    MultiHop,
    Paraphrase,
}

impl QType {
    pub const ALL: [QType; 6] = [
        QType::SingleSession,
        QType::KnowledgeUpdate,
        QType::Temporal,
        QType::MultiSession,
        QType::MultiHop,
        QType::Paraphrase,
    ];
    pub fn name(self) -> &'static str {
        match self {
            QType::SingleSession => "single_session",
            QType::KnowledgeUpdate => "knowledge_update",
            QType::Temporal => "temporal",
            QType::MultiSession => "multi_session",
            QType::MultiHop => "multi_hop",
            QType::Paraphrase => "paraphrase",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Question {
    pub kind: QType,
    pub text: String,
    /// (session, turn) of every gold evidence turn.
    pub gold: Vec<(usize, usize)>,
}

#[derive(Debug, Clone)]
pub struct Conversation {
    pub id: usize,
    pub turns: Vec<Turn>,
    pub questions: Vec<Question>,
}

impl Conversation {
    pub fn sessions(&self) -> usize {
        self.turns.iter().map(|t| t.session + 1).max().unwrap_or(0)
    }
}

const DAY: i64 = 86_400_000;
/// 2023-01-01T00:00:00Z.
const EPOCH_2023: i64 = 1_672_531_200_000;

const CITIES: &[&str] = &[
    "Denver", "Portland", "Austin", "Chicago", "Boston", "Seattle", "Atlanta", "Phoenix", "Minneapolis", "Nashville",
    "Pittsburgh", "Sacramento", "Raleigh", "Tucson", "Baltimore", "Milwaukee", "Cleveland", "Richmond", "Omaha",
    "Albuquerque", "Savannah", "Madison", "Spokane", "Boise", "Louisville", "Charleston",
];
const JOBS: &[(&str, &str)] = &[
    ("nurse", "St. Mary's Hospital"),
    ("data analyst", "Brightline Logistics"),
    ("high school chemistry teacher", "Lincoln High"),
    ("UX designer", "Pixelworks"),
    ("paralegal", "Hart & Moreno"),
    ("software engineer", "Cobalt Systems"),
    ("pharmacist", "CareWell Pharmacy"),
    ("project manager", "Northbeam Construction"),
    ("accountant", "Fielding Partners"),
    ("physical therapist", "MoveWell Clinic"),
    ("marketing coordinator", "Sunleaf Foods"),
    ("line cook", "Osteria Lupa"),
    ("librarian", "the county library"),
    ("electrician", "Volt Brothers"),
];
const SIBLINGS: &[(&str, &str, &str)] = &[
    ("sister", "Emma", "her"),
    ("sister", "Priya", "her"),
    ("sister", "Rosa", "her"),
    ("sister", "Hannah", "her"),
    ("sister", "Mei", "her"),
    ("brother", "Jake", "him"),
    ("brother", "Tomás", "him"),
    ("brother", "Daniel", "him"),
    ("brother", "Kofi", "him"),
    ("brother", "Luca", "him"),
];
const GIFTS: &[&str] = &[
    "signed cookbook", "vintage record player", "pair of hiking boots", "watercolor set", "espresso machine",
    "framed family photo", "silk scarf", "board game collection", "leather journal", "telescope",
];
const PETS: &[(&str, &[&str])] = &[
    ("dog", &["Biscuit", "Maple", "Rufus", "Pepper", "Juno"]),
    ("cat", &["Miso", "Olive", "Tofu", "Luna", "Ziggy"]),
    ("rabbit", &["Clover", "Nibbles", "Hazel"]),
    ("parrot", &["Kiwi", "Mango", "Captain"]),
];
const INSTRUMENTS: &[&str] =
    &["ukulele", "cello", "banjo", "piano", "violin", "saxophone", "drums", "mandolin", "flute", "harmonica"];
const TRIP_PLACES: &[&str] = &[
    "Yellowstone", "the Outer Banks", "Lake Tahoe", "New Orleans", "the Grand Canyon", "Montreal", "Santa Fe",
    "the Catskills", "Big Sur", "Mackinac Island", "Zion", "Sedona",
];

/// A life event: how the user says it, a short name for questions, and the
/// assistant's reply.
const EVENTS: &[(&str, &str, &str)] = &[
    (
        "I ran the {city} half marathon this morning, finished in just under two hours!",
        "running the half marathon",
        "Under two hours is a great time for a half! Make sure you rehydrate and take it easy for a few days.",
    ),
    (
        "Passed my driving test today, I'm finally licensed at {age}!",
        "passing my driving test",
        "Congratulations on getting your license! Take some time to practice highway driving with someone experienced.",
    ),
    (
        "We closed on our first house today, the keys are on the kitchen counter.",
        "closing on our house",
        "Congratulations on becoming homeowners! The first weeks are a good time to change the locks and test the smoke alarms.",
    ),
    (
        "Got my wisdom teeth pulled yesterday, my face is still swollen.",
        "getting my wisdom teeth pulled",
        "Sorry to hear that, swelling usually peaks around day two or three. Cold compresses and soft foods help.",
    ),
    (
        "I started a pottery class on Tuesday nights, my first bowl was lopsided but I love it.",
        "starting the pottery class",
        "A lopsided first bowl is a rite of passage! Centering the clay gets easier with every session.",
    ),
    (
        "I got promoted to team lead today, still kind of in shock.",
        "getting promoted to team lead",
        "That's a big step, congratulations! The first months as a lead are mostly about listening to your team.",
    ),
    (
        "Today I donated blood for the first time, the nurse said I was a champ.",
        "donating blood for the first time",
        "Thank you for donating! Drink plenty of water and avoid heavy lifting for the rest of the day.",
    ),
    (
        "I finished my first Spanish course at the community college tonight.",
        "finishing the Spanish course",
        "Well done! Keeping up a little practice every day will help you hold on to what you learned.",
    ),
];

/// Personal facts stated in other words than the question: (statement,
/// question, assistant reply).
const PARAPHRASES: &[(&str, &str, &str)] = &[
    (
        "I'm allergic to shellfish, found that out the hard way at a crab shack in Maine.",
        "Which seafood gives me an allergic reaction?",
        "That sounds scary. I'll keep that in mind and avoid suggesting recipes with shrimp, crab or lobster.",
    ),
    (
        "I've been vegetarian for about six years now, no meat at all.",
        "How long have I gone without eating meat?",
        "Six years is a long time! There are plenty of hearty plant-based dishes I can suggest.",
    ),
    (
        "My morning commute is a forty-minute ride on the light rail.",
        "How do I get to the office each day and how long does the ride take?",
        "That's a decent chunk of time, podcasts or audiobooks can make it go faster.",
    ),
    (
        "I finally paid off my student loans last month!",
        "Which loans did I finish repaying recently?",
        "That's a huge milestone, congratulations! Maybe redirect those payments into savings now.",
    ),
    (
        "I've been out shooting street scenes at night with my old Nikon.",
        "What kind of photographs do I like to take?",
        "Night street scenes can be striking. A fast prime lens helps a lot in low light.",
    ),
    (
        "My doctor says my blood pressure is too high, so I'm cutting back on salt.",
        "What health issue made me reduce sodium in my diet?",
        "Good call. Herbs, citrus and garlic are great ways to add flavor without salt.",
    ),
    (
        "We're expecting our first baby in the spring!",
        "When is my child due?",
        "What wonderful news! Let me know if you want help with a checklist for the nursery.",
    ),
    (
        "I sell hand-thrown ceramic mugs in a little Etsy shop on the side.",
        "What do I sell online as a side business?",
        "Handmade mugs are lovely. Good photos with natural light make a big difference on Etsy.",
    ),
    (
        "I've been reading a lot of Agatha Christie lately, I can't put them down.",
        "Which mystery author have I been reading?",
        "Her plots are so clever! If you enjoy her, you might also like Dorothy L. Sayers.",
    ),
    (
        "I'm training for a triathlon in September and swimming is definitely my weakest part.",
        "Which of the three triathlon disciplines am I worst at?",
        "Many triathletes struggle with the swim. Drills and open-water practice help a lot.",
    ),
    (
        "My partner proposed on a hiking trip in Yosemite, we're engaged!",
        "Where did I get engaged?",
        "Congratulations to you both! That sounds like a beautiful place for a proposal.",
    ),
    (
        "I switched to working remotely full time, no more office days for me.",
        "Do I still go into the office?",
        "Remote work has its perks. A dedicated workspace at home helps keep a routine.",
    ),
    (
        "I've been learning Japanese with an app every morning before work.",
        "What language am I studying?",
        "Consistency is key with languages. Try adding some Japanese podcasts or shows too.",
    ),
    (
        "Our landlord raised the rent by fifteen percent this year.",
        "How much did my rent go up?",
        "That's a steep increase. It may be worth checking local rules on rent increases.",
    ),
];

/// Everyday topics: what the user asks and sentences of the assistant's
/// answer. `{city}`, `{food}`, `{name}`, `{n}` are filled in.
const FILLER: &[(&[&str], &[&str])] = &[
    (
        &[
            "What are some good neighborhoods to stay in when visiting {city}?",
            "I'm planning a long weekend in {city}, any tips?",
            "Is {city} a good city to visit in the fall?",
        ],
        &[
            "{city} has a lot to offer, especially the downtown area and the riverfront.",
            "Many visitors like to stay near the old town so they can walk to restaurants.",
            "Public transit in the city is decent, but renting a bike is a fun way to explore.",
            "Book a few weeks ahead if you travel on a holiday weekend.",
            "Locals recommend trying the food markets on Saturday mornings.",
            "People who live there say spring and fall have the nicest weather.",
        ],
    ),
    (
        &[
            "Can you give me a quick recipe with {food}?",
            "What can I cook tonight with {food} and some rice?",
            "How long should I roast {food}?",
        ],
        &[
            "A simple option is to sauté it with garlic, olive oil and a pinch of chili flakes.",
            "Roasting at 425°F for about 25 minutes gives a nice caramelized edge.",
            "Serve it over rice with a squeeze of lemon and some fresh herbs.",
            "If you want more protein, add chickpeas or a fried egg on top.",
            "Leftovers keep well in the fridge for three or four days.",
        ],
    ),
    (
        &[
            "How do I ask my manager for a raise?",
            "Any tips for a job interview next week?",
            "My coworker keeps interrupting me in meetings, how should I handle it?",
            "How do I write a good cover letter for a new job?",
        ],
        &[
            "Preparation is everything: list your accomplishments from the past year with numbers.",
            "Practice answering common questions out loud, it makes a real difference.",
            "A calm, private conversation usually works better than calling it out in front of the team.",
            "Research the company's recent work so you can ask thoughtful questions.",
            "Many people find it helpful to frame the request around the value they bring to the job.",
        ],
    ),
    (
        &[
            "What's a good beginner workout routine?",
            "How can I improve my running pace?",
            "I keep getting sore knees after the gym, what am I doing wrong?",
        ],
        &[
            "Start with three full-body sessions a week and rest days in between.",
            "Interval training once a week is one of the best ways to get faster.",
            "Sore knees often come from increasing mileage too quickly or worn-out shoes.",
            "Stretching after a workout and sleeping well both help recovery.",
            "Listen to your body and scale back if the pain gets sharper.",
        ],
    ),
    (
        &[
            "Can you recommend a movie for a rainy night?",
            "What's a good TV series to binge this weekend?",
            "Any good documentaries about music?",
        ],
        &[
            "If you like mysteries, a classic whodunit is perfect for a rainy night.",
            "A lot of people love slow-burn dramas that build over several seasons.",
            "There are great documentaries about jazz musicians and the history of rock.",
            "Comedies are a safe bet if you are watching with family.",
            "Check whether it's on your streaming service before you get your heart set on it.",
        ],
    ),
    (
        &[
            "How often should I water a snake plant?",
            "My tomato plants have yellow leaves, what's wrong?",
            "What vegetables grow well on a balcony?",
        ],
        &[
            "Snake plants like to dry out completely between waterings, every two or three weeks is enough.",
            "Yellow leaves often mean overwatering or a lack of nitrogen.",
            "Herbs, cherry tomatoes and lettuce do well in containers.",
            "Make sure the pots have drainage holes so the roots don't rot.",
        ],
    ),
    (
        &[
            "How much should I keep in an emergency fund?",
            "Is it better to pay off debt or invest?",
            "How do I make a monthly budget that I'll actually stick to?",
        ],
        &[
            "A common rule of thumb is three to six months of expenses.",
            "High-interest debt usually comes first, since the interest outpaces most investments.",
            "Tracking spending for a month shows where the money really goes.",
            "Automating transfers to savings on payday makes it much easier.",
        ],
    ),
    (
        &[
            "What's a thoughtful birthday gift for a coworker?",
            "Any ideas for a birthday party for a five-year-old?",
            "What should I write in a birthday card for my boss?",
        ],
        &[
            "A nice notebook, good coffee or a plant are safe and thoughtful choices.",
            "Keep it simple: a theme, a few games and cake go a long way.",
            "A short, warm message thanking them for their support works well.",
            "Personal touches matter more than the price of the gift.",
        ],
    ),
    (
        &[
            "My neighbor's dog barks all night, what can I do?",
            "How do I keep a cat off the kitchen counter?",
            "What's the best way to introduce a new pet to a toddler?",
        ],
        &[
            "Talking to your neighbor calmly first is usually the best start.",
            "Cats respond well to double-sided tape and giving them a taller perch elsewhere.",
            "Supervise early meetings and let the pet set the pace.",
            "Rewarding good behavior works better than punishment for most animals.",
        ],
    ),
    (
        &[
            "Can you help me debug a Python error about a missing key?",
            "What's the difference between a list and a tuple?",
            "How do I learn SQL quickly?",
        ],
        &[
            "A KeyError means the dictionary has no entry for that key; use .get() to supply a default.",
            "Lists are mutable while tuples are not, which also makes tuples usable as dictionary keys.",
            "Practice on a real dataset; writing queries against something you care about sticks better.",
            "Break the problem into small steps and print the intermediate values.",
        ],
    ),
    (
        &[
            "How do I get better sleep?",
            "Is it normal to feel tired after lunch?",
            "Any tips for dealing with stress at work?",
        ],
        &[
            "Keeping the same bedtime every day, even on weekends, helps a lot.",
            "A dip in energy after lunch is normal, a short walk can help.",
            "Short breaks and breathing exercises can take the edge off a stressful day.",
            "Limiting screens in the hour before bed improves sleep for many people.",
        ],
    ),
    (
        &[
            "What should I pack for a week of hiking?",
            "How do I find cheap flights?",
            "Do I need travel insurance for a trip abroad?",
        ],
        &[
            "Layers, a rain shell, broken-in boots and a first aid kit are the essentials.",
            "Flexible dates and price alerts are the most reliable way to find cheap flights.",
            "Travel insurance is worth it for expensive or far-away trips.",
            "Check the weather forecast the day before you leave and adjust your packing.",
        ],
    ),
    (
        &[
            "What are some easy songs to learn on guitar?",
            "How long does it take to learn to read music?",
            "Any tips for practicing an instrument when I'm busy?",
        ],
        &[
            "Songs with three or four open chords are great for beginners.",
            "Most people can read simple music within a few weeks of regular practice.",
            "Fifteen focused minutes a day beats one long session a week.",
            "Recording yourself is a great way to notice what to work on.",
        ],
    ),
    (
        &[
            "How do I get my {name} to call more often?",
            "My {name} and I had an argument, how do I patch things up?",
            "What's a fun thing to do with family over the holidays?",
        ],
        &[
            "Setting a regular time for calls can make it a habit for both of you.",
            "A sincere apology and some time usually go a long way.",
            "Board games, cooking together or a winter walk are great family activities.",
            "Family relationships take effort from both sides, but small gestures count.",
        ],
    ),
];

const FOODS: &[&str] =
    &["chickpeas", "salmon", "broccoli", "sweet potatoes", "tofu", "mushrooms", "chicken thighs", "cauliflower", "lentils"];
const RELATIVES: &[&str] = &["mom", "dad", "cousin", "aunt", "best friend", "roommate"];
const SMALL_TALK: &[(&str, &str)] = &[
    ("Thanks, that's really helpful!", "You're welcome! Let me know if anything else comes up."),
    ("Good morning! Busy day ahead.", "Good morning! I hope it goes smoothly, I'm here if you need a hand."),
    ("Ugh, it's been raining all week here.", "Rainy weeks can be draining. Maybe a good book and some tea?"),
    ("I'm so tired today.", "Sorry to hear that. Try to get some rest tonight if you can."),
    ("Quick question before I forget.", "Sure, go ahead!"),
    ("Haha, that's funny.", "Glad it made you smile!"),
    ("Okay, I'll try that this weekend.", "Sounds like a plan, let me know how it goes."),
];

fn fill(t: &str, rng: &mut Rng) -> String {
    t.replace("{city}", rng.pick::<&str>(CITIES))
        .replace("{food}", rng.pick::<&str>(FOODS))
        .replace("{name}", rng.pick::<&str>(RELATIVES))
        .replace("{age}", &rng.range(17, 34).to_string())
}

/// One user turn and the assistant's reply, possibly planted evidence.
struct Exchange {
    user: String,
    assistant: String,
    tag: Option<&'static str>,
}

fn filler(rng: &mut Rng) -> Exchange {
    if rng.chance(0.25) {
        let (u, a) = rng.pick(SMALL_TALK);
        return Exchange { user: u.to_string(), assistant: a.to_string(), tag: None };
    }
    let (asks, says) = rng.pick(FILLER);
    let user = fill(rng.pick::<&str>(asks), rng);
    let n = rng.range(2, 4);
    let answer: Vec<String> = rng.pick_n(says, n.min(says.len())).iter().map(|s| fill(s, rng)).collect();
    Exchange { user, assistant: answer.join(" "), tag: None }
}

fn planted(user: String, assistant: String, tag: &'static str) -> Exchange {
    Exchange { user, assistant, tag: Some(tag) }
}

/// Generates conversation `id` from `seed`.
pub fn conversation(seed: u64, id: usize) -> Conversation {
    let mut rng = Rng::new(seed ^ (id as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let n_sessions = rng.range(8, 12);
    let mut sessions: Vec<Vec<Exchange>> = (0..n_sessions).map(|_| Vec::new()).collect();
    let late = |rng: &mut Rng| rng.range(n_sessions / 2 + 1, n_sessions - 1);
    let early = |rng: &mut Rng| rng.range(0, n_sessions / 2 - 1);
    let any = |rng: &mut Rng| rng.range(0, n_sessions - 1);

    // Where the user lives, then a move.
    let cities = rng.pick_n(CITIES, 3);
    let (city1, city2, sib_city) = (cities[0], cities[1], cities[2]);
    let s = early(&mut rng);
    sessions[s].push(planted(
        rng.pick(&[
            "I live in {c} with my partner, we have a small place near the park.",
            "We've been in {c} for about three years now, I like living here.",
            "Living in {c} is great in the summer but the winters are rough.",
        ])
        .replace("{c}", city1),
        format!("{city1} sounds lovely! Having a park nearby is a real perk of city living."),
        "city1",
    ));
    let s = late(&mut rng);
    sessions[s].push(planted(
        rng.pick(&[
            "Big news: we finally moved to {c}! The new apartment is tiny but I love the neighborhood.",
            "The movers just left, we're officially living in {c} now.",
            "We relocated to {c} last weekend, it feels like home now even with all the boxes.",
            "Still getting used to life in a new city since the move to {c}.",
        ])
        .replace("{c}", city2),
        format!("Congratulations on the move to {city2}! Settling into a new city takes time, so be patient with yourself."),
        "city2",
    ));

    // The job, then a new one.
    let jobs = rng.pick_n(JOBS, 2);
    let s = early(&mut rng);
    sessions[s].push(planted(
        rng.pick(&["I work as a {j} at {co}, the shifts can be long.", "My job as a {j} at {co} keeps me busy, the shifts can be long."])
            .replace("{j}", jobs[0].0)
            .replace("{co}", jobs[0].1),
        format!("Being a {} is demanding work. Make sure you get enough rest between shifts.", jobs[0].0),
        "job1",
    ));
    let s = late(&mut rng);
    sessions[s].push(planted(
        rng.pick(&[
            "I accepted an offer as a {j} at {co}, I start on Monday!",
            "First week at my new job as a {j} at {co} went really well.",
            "I left my old job, now I work as a {j} at {co}.",
        ])
        .replace("{j}", jobs[1].0)
        .replace("{co}", jobs[1].1),
        format!("Congratulations on the new role at {}! The first weeks are a great time to ask lots of questions.", jobs[1].1),
        "job2",
    ));

    // A sibling, their city, and a birthday visit (two different sessions).
    let (rel, sib, pron) = *rng.pick(SIBLINGS);
    let gift = *rng.pick(GIFTS);
    let sa = any(&mut rng);
    let mut sb = any(&mut rng);
    while sb == sa {
        sb = any(&mut rng);
    }
    sessions[sa].push(planted(
        format!("My {rel} {sib} lives in {sib_city}, we talk on the phone every Sunday."),
        format!("It's nice that you and {sib} keep in touch so regularly."),
        "sibling",
    ));
    sessions[sb].push(planted(
        format!("{sib}'s birthday is in two weeks and I'm flying out to surprise {pron} with a {gift}."),
        format!("What a thoughtful surprise! A {gift} is a lovely birthday gift, and the visit itself will mean a lot."),
        "visit",
    ));

    // A pet.
    let (species, names) = *rng.pick(PETS);
    let pet = *rng.pick(names);
    let s = any(&mut rng);
    sessions[s].push(planted(
        format!("We adopted a {species} from the shelter last weekend, we named {} {pet}.", if species == "dog" { "him" } else { "her" }),
        format!("{pet} is a great name! The first few weeks at home are an adjustment, so keep the routine simple."),
        "pet",
    ));

    // Two paraphrased personal facts.
    let paras = rng.pick_n(PARAPHRASES, 2);
    let para_tags = ["para0", "para1"];
    for (p, tag) in paras.iter().zip(para_tags) {
        let s = any(&mut rng);
        sessions[s].push(planted(p.0.to_string(), p.2.to_string(), tag));
    }

    // Three instruments and three trips, each in its own session.
    let instruments = rng.pick_n(INSTRUMENTS, 3);
    let inst_sessions = rng.pick_n(&(0..n_sessions).collect::<Vec<_>>(), 3);
    let inst_texts = [
        "I signed up for {i} lessons at the community center, first one is Thursday.",
        "Picked up a used {i} at a garage sale, I'm teaching myself with online videos.",
        "My {i} teacher says my technique is improving, another instrument to add to the list!",
    ];
    for (k, (i, s)) in instruments.iter().zip(&inst_sessions).enumerate() {
        sessions[*s].push(planted(
            inst_texts[k].replace("{i}", i),
            format!("That's exciting! The {i} is a rewarding instrument, short daily practice works best."),
            ["inst0", "inst1", "inst2"][k],
        ));
    }
    let places = rng.pick_n(TRIP_PLACES, 3);
    let trip_sessions = rng.pick_n(&(0..n_sessions).collect::<Vec<_>>(), 3);
    let trip_texts = [
        "Just got back from a weekend trip to {p}, the views were unreal.",
        "We spent four days in {p}, I'm already missing it.",
        "Our trip to {p} got rained out half the time, but we still had fun.",
    ];
    for (k, (p, s)) in places.iter().zip(&trip_sessions).enumerate() {
        sessions[*s].push(planted(
            trip_texts[k].replace("{p}", p),
            format!("{p} is a wonderful place to visit! Did you take many photos?"),
            ["trip0", "trip1", "trip2"][k],
        ));
    }

    // Two dated events, the first in an earlier session.
    let events = rng.pick_n(EVENTS, 2);
    let e1 = early(&mut rng);
    let e2 = late(&mut rng);
    for ((text, _, reply), (s, tag)) in events.iter().zip([(e1, "event0"), (e2, "event1")]) {
        sessions[s].push(planted(fill(text, &mut rng), reply.to_string(), tag));
    }

    // Filler, then shuffle each session's exchanges; assign dates and ids.
    let mut turns = Vec::new();
    let mut tags: Vec<(&'static str, (usize, usize))> = Vec::new();
    let mut day = EPOCH_2023 + rng.range(0, 150) as i64 * DAY;
    for (si, exchanges) in sessions.iter_mut().enumerate() {
        let total = rng.range(5, 8).max(exchanges.len() + 2);
        while exchanges.len() < total {
            let f = filler(&mut rng);
            if !exchanges.iter().any(|e| e.user == f.user || e.assistant == f.assistant) {
                exchanges.push(f);
            }
        }
        for i in (1..exchanges.len()).rev() {
            let j = rng.range(0, i);
            exchanges.swap(i, j);
        }
        let start = day + rng.range(8, 21) as i64 * 3_600_000;
        for e in exchanges.iter() {
            let t = turns.iter().filter(|t: &&Turn| t.session == si).count();
            if let Some(tag) = e.tag {
                tags.push((tag, (si, t)));
            }
            for (k, (speaker, text)) in [("user", &e.user), ("assistant", &e.assistant)].into_iter().enumerate() {
                turns.push(Turn { session: si, turn: t + k, speaker, text: text.clone(), at: start + (t + k) as i64 * 60_000 });
            }
        }
        day += rng.range(12, 40) as i64 * DAY;
    }
    let at = |tag: &str| tags.iter().find(|(t, _)| *t == tag).map(|(_, k)| *k).expect("planted");

    let q = |kind, text: String, gold: Vec<(usize, usize)>| Question { kind, text, gold };
    let events_short: Vec<&str> = events.iter().map(|e| e.1).collect();
    let questions = vec![
        q(QType::SingleSession, format!("What did we name the {species} we adopted?"), vec![at("pet")]),
        q(QType::SingleSession, format!("What's my {rel}'s name?"), vec![at("sibling")]),
        q(
            QType::KnowledgeUpdate,
            rng.pick(&["Which city do I live in now?", "Where am I living these days?", "What city is home for me currently?"])
                .to_string(),
            vec![at("city2")],
        ),
        q(
            QType::KnowledgeUpdate,
            rng.pick(&["What is my current job?", "Where do I work now?", "What do I do for work these days?"]).to_string(),
            vec![at("job2")],
        ),
        q(
            QType::Temporal,
            format!("Which happened first: {} or {}?", events_short[1], events_short[0]),
            vec![at("event0"), at("event1")],
        ),
        q(QType::Temporal, format!("When was I {}?", events_short[1]), vec![at("event1")]),
        q(
            QType::MultiSession,
            "How many musical instruments have I been learning?".to_string(),
            vec![at("inst0"), at("inst1"), at("inst2")],
        ),
        q(QType::MultiSession, "How many trips have I taken this year?".to_string(), vec![at("trip0"), at("trip1"), at("trip2")]),
        q(
            QType::MultiHop,
            format!("Which city am I flying to for my {rel}'s birthday?"),
            vec![at("sibling"), at("visit")],
        ),
        q(QType::Paraphrase, paras[0].1.to_string(), vec![at("para0")]),
        q(QType::Paraphrase, paras[1].1.to_string(), vec![at("para1")]),
    ];
    Conversation { id, turns, questions }
}

/// The whole dataset.
pub fn dataset(seed: u64, conversations: usize) -> Vec<Conversation> {
    (0..conversations).map(|i| conversation(seed, i)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dataset_is_deterministic_and_gold_turns_are_user_turns() {
        let a = dataset(7, 4);
        let b = dataset(7, 4);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.turns.len(), y.turns.len());
            assert!(x.turns.iter().zip(&y.turns).all(|(s, t)| s.text == t.text && s.at == t.at));
        }
        for c in &a {
            for q in &c.questions {
                for g in &q.gold {
                    let t = c.turns.iter().find(|t| t.key() == *g).unwrap();
                    assert_eq!(t.speaker, "user", "{}", q.text);
                }
            }
        }
    }
}
