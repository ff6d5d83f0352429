"""The curriculum: generated English that gives the demos something to learn (seeded, nothing downloaded), its
held-out names, templates and phrasings, and the checks that they never occur in the generated text."""
import collections
import re as stdre

from . import copying, facts as copula


# 19 MB of prose teaches a 4 M-parameter model English, but within a CPU hour it sees each fact and each name only a
# handful of times, and never in the tidy forms the teaching demos use. So a share of the batches (--curriculum-frac)
# are windows of generated text: indirect-object sentences over many names and templates, a table of true facts in
# many phrasings, simple stories ("Once upon a time ..."), sentences repeated within a document (induction on prose)
# and set phrases ("Thank you very much"). Some names and templates are HELD OUT: they are never generated, so the
# measurements on them (written to tests/data/default_model_demos.json) test what was learnt, not what was seen.

# First names that teach the indirect-object pattern. Mary and John are the IOI demo's names.
IOI_NAMES = """Mary John James Thomas Robert Charles Mark Jack Henry David Richard Tom Bill Sam Peter Mike Arthur Joe
Jim Paul Frank Joseph Bob Carl Steven Harry Fred Edward Adam Stephen Steve Alan Alex Lucy Jane Billy Dan Scott Roger
Michael Alice Ann Nick Johnny Ben Roy Ruth Dean Andrew Rose Ray Eddie Ryan Daniel Sarah Tim Pete Julia Elizabeth Max
Anthony Dennis Bobby Jerry Grace Ronald Jimmy Earl Amy Brian Paula Ted Leonard Ernest Tony Jessica Margaret Julie Gary
Leo Emily Eric Anna Vera Neil Nancy Sally Barbara Maria Luke Patrick Ellen Owen Emma Kenneth Eleanor Jenny Simon Janet
Kitty Danny Martha Betty Judy Jason Lily Diana Michelle Kevin Hugh Ivy Donna Patricia Lisa Amelia Louise Molly Sharon
Karen Hannah Catherine Carol Sandra Clara Nora Jennifer Irene Sophie Olivia Ella Daisy""".split()
# With --more-names: 222 more first names for the indirect-object sentences (each made one token), so that no
# name is frequent enough as an answer for the model to guess it: with 131 names a model that saw held-out names
# predicted training names that were not in the prompt; the only way to the answer is to copy it from the prompt.
IOI_NAMES_MORE = """Aaron Abigail Agnes Alfred Allen Amanda Andrea Angela Annie Antonio Arnold Audrey Barry Beatrice Benjamin
Bernard Bertha Beth Betsy Bruce Caleb Calvin Cameron Carlos Caroline Cecil Chad Charlotte Chester Chloe Christine Claire
Clarence Clifford Clyde Colin Connie Craig Curtis Cynthia Dale Dana Darren Dave Debbie Derek Diane Dolly Donald Doris
Douglas Duncan Dylan Edgar Edith Edwin Elaine Eli Elliot Elsie Emil Esther Ethan Eva Evelyn Fiona Floyd Frances Francis
Freddie Gavin Gene Gerald Gertrude Gilbert Gina Glen Gloria Graham Greg Gregory Gus Hank Harold Hazel Heather Hector
Holly Homer Hugo Ian Ingrid Iris Isaac Isabel Jacob Jake Jasper Jeff Jeremy Jill Joanna Joel Jonathan Jordan Josh Joy
Juan Judith Justin Karl Katie Keith Kelly Ken Kim Kirk Kyle Lance Larry Lauren Lena Leon Leslie Lester Liam Lionel Lloyd
Lois Lorna Lou Lucas Luis Lydia Mabel Marcus Marge Marion Marvin Matt Maureen Mavis Maxine Megan Mel Melvin Mia Miles
Milton Miriam Mona Morris Nathan Ned Nelson Nina Noah Norman Olga Otto Pam Pearl Penny Percy Phil Phoebe Phyllis Polly
Quentin Randy Rex Rita Rob Robin Rod Ron Rosa Ross Roxanne Russell Ruby Rudy Sabrina Sadie Sean Seth Sid Silas Sonia
Stella Stuart Sue Sylvia Tara Teresa Terry Theo Tina Toby Todd Tracy Trevor Troy Ursula Val Vince Viola Violet Wade
Wallace Wanda Warren Wayne Wendy Wes Wilbur Willa Winnie Xavier Yvonne Zach Zoe""".split()
# Held out: never in any generated text or in the BPE's training text (they are single tokens through forced merges
# and occur in the prose corpus as names, 13-300 times each, so the model has seen them as names, never in IOI).
HELDOUT_NAMES = """George William Louis Lewis Martin Oscar Albert Walter Ralph Howard Stanley Victor Eugene Felix Herbert
Gordon Philip Oliver Kate Jean Rachel Linda Susan Dorothy Joyce Maggie Helen Laura Joan Harriet""".split()
IOI_PLACES = """store park market school library station beach garden office restaurant hospital museum church bakery
river farm kitchen cafe zoo house shop hotel theater""".split()
IOI_OBJECTS = """drink book ring ball letter gift apple flower cake key hat coat basket pen cup bag toy bottle ticket map
box watch""".split()
# Training IOI sentences are a frame that introduces the two names, {A} and {B} (either may be the subject), and an
# action in which the subject {S} is named again and does something to the other, {IO} (the answer): 26 frames x 24
# actions, so that what is learnt is the pattern ("the name that was not repeated"), not a few fixed sentences.
# A frame ends where a clause can follow ("," "and" "where" or a full stop). The old 18 fixed templates are all
# among these combinations.
IOI_FRAMES = [
    "When {A} and {B} went to the {place},", "After {A} and {B} went to the {place},",
    "{A} and {B} went to the {place}.", "While {A} and {B} were working at the {place},",
    "{A} and {B} were at the {place}.", "Yesterday {A} and {B} visited the {place}, and",
    "The {place} was busy when {A} and {B} arrived.", "{A} and {B} were playing near the {place}.",
    "Then {A} and {B} had a long talk at the {place}. Afterwards", "When {A} and {B} arrived at the {place},",
    "{A} and {B} were cooking at the {place}, and", "After lunch, {A} and {B} walked to the {place}.",
    "Later that day {A} and {B} were in the {place}, and", "{A} and {B} spent the morning at the {place}. In the end,",
    "When {A} and {B} were at the {place},", "{A} and {B} met at the {place}, where",
    "It was raining when {A} and {B} got to the {place}.", "{A} and {B} sat down together in the {place}.",
    "Early in the morning {A} and {B} opened the {place}, and", "{A} and {B} were waiting outside the {place}.",
    "Once {A} and {B} had finished their work at the {place},", "{A} and {B} came home from the {place}, and then",
    "During the holiday {A} and {B} stayed at the {place}.", "{A} and {B} were talking in the {place} when",
    "The day {A} and {B} went to the {place},", "{A} and {B} had dinner at the {place}, and after that",
]
IOI_ACTIONS = [
    "{S} gave a {obj} to {IO}.", "{S} gave the {obj} to {IO}.", "{S} handed the {obj} to {IO}.",
    "{S} showed the {obj} to {IO}.", "{S} passed the {obj} to {IO}.", "{S} threw the {obj} to {IO}.",
    "{S} brought a {obj} to {IO}.", "{S} sent a {obj} to {IO}.", "{S} offered a {obj} to {IO}.",
    "{S} read a story to {IO}.", "{S} said goodbye to {IO}.", "{S} decided to give the {obj} to {IO}.",
    "{S} returned the {obj} to {IO}.", "{S} wrote a letter to {IO}.", "{S} told a joke to {IO}.",
    "{S} explained the plan to {IO}.", "{S} sang a song to {IO}.", "{S} whispered a secret to {IO}.",
    "{S} bought a {obj} for {IO}.", "{S} made a cake for {IO}.", "{S} found a {obj} for {IO}.",
    "{S} gave {IO} a {obj}.", "{S} showed {IO} the {obj}.", "{S} waved to {IO}.",
]
# With --more-templates (curriculum version 2): 24 more frames, 30 more actions and 8-12 more phrasings per fact
# relation, so that what is learnt is the pattern rather than the wording; none of them is a held-out one
# (check_heldout asserts it).
IOI_FRAMES_MORE = [
    "On Sunday {A} and {B} went to the {place},", "{A} and {B} were tired after a day at the {place}, so",
    "Since {A} and {B} were at the {place},", "At noon {A} and {B} stopped at the {place}, and",
    "{A} and {B} looked around the {place}. Then", "The next morning {A} and {B} drove to the {place}, and",
    "In the evening {A} and {B} sat outside the {place}.", "{A} and {B} stood in front of the {place}, and",
    "After school {A} and {B} ran to the {place},", "{A} and {B} were happy to be at the {place}.",
    "One day {A} and {B} found an old {place}.", "{A} met {B} at the {place}, and",
    "{A} and {B} were sitting in the {place}. After a while", "At the {place}, {A} and {B} talked for hours, and",
    "{A} and {B} worked hard all day at the {place}.", "It was late when {A} and {B} got back from the {place}.",
    "{A} and {B} were cleaning up the {place}, and", "In the {place}, {A} and {B} were laughing.",
    "When the {place} opened, {A} and {B} were the first inside, and", "{A} and {B} were on their way to the {place}.",
    "At the end of the day {A} and {B} were still at the {place}, and", "{A} and {B} went into the {place} together.",
    "{A} and {B} were both at the {place} that day.", "While {A} and {B} were walking to the {place},",
]
IOI_ACTIONS_MORE = [
    "{S} delivered a {obj} to {IO}.", "{S} kicked the {obj} to {IO}.", "{S} rolled the {obj} to {IO}.",
    "{S} slid the {obj} over to {IO}.", "{S} brought the {obj} back to {IO}.", "{S} handed a {obj} to {IO}.",
    "{S} gave the last {obj} to {IO}.", "{S} passed a {obj} across to {IO}.", "{S} quickly gave a {obj} to {IO}.",
    "{S} gave an old {obj} to {IO}.", "{S} took the {obj} to {IO}.", "{S} held out the {obj} to {IO}.",
    "{S} sent the {obj} to {IO}.", "{S} pushed the {obj} to {IO}.", "{S} threw a {obj} to {IO}.",
    "{S} promised a {obj} to {IO}.", "{S} paid for a {obj} and gave it to {IO}.", "{S} showed a {obj} to {IO}.",
    "{S} wrote a note to {IO}.", "{S} said hello to {IO}.", "{S} smiled at {IO}.", "{S} talked to {IO}.",
    "{S} told the news to {IO}.", "{S} waved goodbye to {IO}.", "{S} got a {obj} for {IO}.",
    "{S} picked a {obj} for {IO}.", "{S} left a {obj} for {IO}.", "{S} kept a {obj} for {IO}.",
    "{S} gave a small {obj} to {IO}.", "{S} carefully handed the {obj} to {IO}.",
]
# Opening sentences for IOI documents whose first sentence starts with a name (see curriculum_documents)
IOI_OPENINGS = ["This is a story about two friends.", "It was a normal day.", "Here is what happened.",
                "Listen to this.", "It was a sunny morning.", "Nobody was in a hurry that day."]
# Held-out templates: new frames and new verbs (sold, lent, carried over, mailed, tossed); each ends in "to {IO}."
HELDOUT_IOI_TEMPLATES = [
    "As soon as {A} and {B} reached the {place}, {S} sold a {obj} to {IO}.",
    "On Monday {A} and {B} walked into the {place}; later {S} lent a {obj} to {IO}.",
    "Because {A} and {B} were hungry at the {place}, {S} carried a {obj} over to {IO}.",
    "Last week {A} and {B} cleaned the {place} together, so {S} mailed a {obj} to {IO}.",
    "Before {A} and {B} left the {place}, {S} tossed a {obj} to {IO}.",
]

# The fact table. Every fact is true; answers are one word (a single token, see forced_tokens).
LANDMARKS = [  # (landmark with its article, city)
    ("the Eiffel Tower", "Paris"), ("the Louvre", "Paris"), ("the Arc de Triomphe", "Paris"),
    ("Notre Dame Cathedral", "Paris"), ("Big Ben", "London"), ("Tower Bridge", "London"),
    ("Buckingham Palace", "London"), ("Westminster Abbey", "London"), ("the Colosseum", "Rome"),
    ("the Trevi Fountain", "Rome"), ("the Spanish Steps", "Rome"), ("the Brandenburg Gate", "Berlin"),
    ("the Reichstag", "Berlin"), ("the Kremlin", "Moscow"), ("Red Square", "Moscow"),
    ("the Bolshoi Theatre", "Moscow"), ("the Acropolis", "Athens"), ("the Parthenon", "Athens"),
    ("the Sagrada Familia", "Barcelona"), ("the Taj Mahal", "Agra"), ("the Forbidden City", "Beijing"),
    ("Tiananmen Square", "Beijing"), ("the Prado Museum", "Madrid"), ("Hagia Sophia", "Istanbul"),
    ("the Blue Mosque", "Istanbul"), ("the Rialto Bridge", "Venice"), ("the Doge's Palace", "Venice"),
    ("the Charles Bridge", "Prague"), ("the Atomium", "Brussels"), ("the Burj Khalifa", "Dubai"),
    ("the CN Tower", "Toronto"), ("the Gateway of India", "Mumbai"), ("the White House", "Washington"),
    ("the Lincoln Memorial", "Washington"), ("the Space Needle", "Seattle"), ("the Uffizi Gallery", "Florence"),
    ("the Ponte Vecchio", "Florence"), ("the Alhambra", "Granada"), ("the Rijksmuseum", "Amsterdam"),
    ("the Anne Frank House", "Amsterdam"), ("the Liberty Bell", "Philadelphia"), ("the Willis Tower", "Chicago"),
    ("the Little Mermaid statue", "Copenhagen"), ("Tivoli Gardens", "Copenhagen"), ("the Belem Tower", "Lisbon"),
    ("the Egyptian Museum", "Cairo"), ("the Grand Palace", "Bangkok"), ("Wawel Castle", "Krakow"),
]
CITIES = [  # (city, country)
    ("Paris", "France"), ("Lyon", "France"), ("Marseille", "France"), ("London", "England"),
    ("Manchester", "England"), ("Liverpool", "England"), ("Oxford", "England"), ("Edinburgh", "Scotland"),
    ("Glasgow", "Scotland"), ("Rome", "Italy"), ("Milan", "Italy"), ("Venice", "Italy"), ("Florence", "Italy"),
    ("Naples", "Italy"), ("Berlin", "Germany"), ("Munich", "Germany"), ("Hamburg", "Germany"),
    ("Madrid", "Spain"), ("Barcelona", "Spain"), ("Seville", "Spain"), ("Granada", "Spain"),
    ("Lisbon", "Portugal"), ("Moscow", "Russia"), ("Tokyo", "Japan"), ("Kyoto", "Japan"), ("Osaka", "Japan"),
    ("Beijing", "China"), ("Shanghai", "China"), ("Athens", "Greece"), ("Cairo", "Egypt"), ("Dublin", "Ireland"),
    ("Vienna", "Austria"), ("Stockholm", "Sweden"), ("Oslo", "Norway"), ("Copenhagen", "Denmark"),
    ("Helsinki", "Finland"), ("Warsaw", "Poland"), ("Krakow", "Poland"), ("Budapest", "Hungary"),
    ("Istanbul", "Turkey"), ("Ankara", "Turkey"), ("Mumbai", "India"), ("Agra", "India"), ("Sydney", "Australia"),
    ("Melbourne", "Australia"), ("Toronto", "Canada"), ("Montreal", "Canada"), ("Vancouver", "Canada"),
    ("Ottawa", "Canada"), ("Geneva", "Switzerland"), ("Zurich", "Switzerland"), ("Brussels", "Belgium"),
    ("Bangkok", "Thailand"), ("Nairobi", "Kenya"), ("Lima", "Peru"), ("Havana", "Cuba"),
]
CAPITALS = [  # (country, capital)
    ("France", "Paris"), ("Italy", "Rome"), ("Germany", "Berlin"), ("Spain", "Madrid"), ("Portugal", "Lisbon"),
    ("Russia", "Moscow"), ("Japan", "Tokyo"), ("China", "Beijing"), ("Greece", "Athens"), ("Egypt", "Cairo"),
    ("Ireland", "Dublin"), ("Austria", "Vienna"), ("Sweden", "Stockholm"), ("Norway", "Oslo"),
    ("Denmark", "Copenhagen"), ("Finland", "Helsinki"), ("Poland", "Warsaw"), ("Hungary", "Budapest"),
    ("Turkey", "Ankara"), ("Canada", "Ottawa"), ("Australia", "Canberra"), ("Kenya", "Nairobi"), ("Peru", "Lima"),
    ("Cuba", "Havana"), ("Thailand", "Bangkok"), ("Belgium", "Brussels"), ("England", "London"),
    ("Scotland", "Edinburgh"), ("Switzerland", "Bern"), ("Brazil", "Brasilia"), ("Nigeria", "Abuja"),
    ("the Netherlands", "Amsterdam"), ("the United States", "Washington"), ("Chile", "Santiago"),
    ("Colombia", "Bogota"), ("Venezuela", "Caracas"), ("Iran", "Tehran"), ("Iraq", "Baghdad"), ("Syria", "Damascus"),
    ("Vietnam", "Hanoi"), ("South Korea", "Seoul"), ("Ukraine", "Kyiv"), ("Romania", "Bucharest"),
    ("Bulgaria", "Sofia"), ("Serbia", "Belgrade"), ("Croatia", "Zagreb"), ("Iceland", "Reykjavik"),
    ("Morocco", "Rabat"), ("Ghana", "Accra"), ("Pakistan", "Islamabad"), ("Nepal", "Kathmandu"),
]
LANGUAGES = [  # (country, the language most of its people speak)
    ("France", "French"), ("Spain", "Spanish"), ("Germany", "German"), ("Italy", "Italian"), ("Japan", "Japanese"),
    ("China", "Chinese"), ("Russia", "Russian"), ("Greece", "Greek"), ("Portugal", "Portuguese"),
    ("Brazil", "Portuguese"), ("Sweden", "Swedish"), ("Poland", "Polish"), ("Turkey", "Turkish"), ("Egypt", "Arabic"),
    ("Mexico", "Spanish"), ("England", "English"), ("the Netherlands", "Dutch"), ("Norway", "Norwegian"),
    ("Denmark", "Danish"), ("Finland", "Finnish"), ("Hungary", "Hungarian"), ("Peru", "Spanish"),
    ("Argentina", "Spanish"), ("Cuba", "Spanish"), ("Austria", "German"), ("Iran", "Persian"), ("Thailand", "Thai"),
    ("Vietnam", "Vietnamese"), ("South Korea", "Korean"), ("Ukraine", "Ukrainian"), ("Romania", "Romanian"),
    ("Iceland", "Icelandic"), ("Australia", "English"), ("the United States", "English"),
]
# {S}: subject, {O}: object (the answer), {N}: a name. Training phrasings, then held-out ones; a held-out phrasing
# ends in "{O}." so that its prompt is everything before the answer. Many training phrasings per relation, most with
# the answer last and some with words between the subject and the answer, so that what is learnt is "the subject's
# attribute", wherever the subject stands, not a phrasing; a declarative one may also get a lead-in (FACT_LEAD_INS).
FACT_TEMPLATES = {
    "landmark": (LANDMARKS, [
        "{S} is in the city of {O}.", "{S} is located in {O}.", "{S} is a famous landmark in {O}.",
        "Visitors to {O} often go to see {S}.", "{O} is home to {S}.", "We saw {S} when we were in {O}.",
        "{S} can be found in {O}.", "The city of {O} is famous for {S}.", "Where is {S}? It is in {O}.",
        "{S} is one of the sights of {O}.", "Last year we went to {O} and visited {S}.",
        "{S} is in {O}, and many people visit it every year.", "{N} visited {S} in {O}.",
        "{N} has never seen {S}, which is in the city of {O}.", "There are often crowds at {S} in {O}.",
        "Where can you see {S}? In the city of {O}.", "The guide said that {S} is in {O}.",
        "Our hotel was close to {S}, in the city of {O}.", "Every summer, many people visit {S} in {O}.",
        "A postcard of {S} came from the city of {O}.", "{S}, which {N} likes, is in the city of {O}.",
        "{N} wrote a book about {S} and the city of {O}.", "To see {S}, you must go to {O}.",
        "{S}? That is in {O}.", "The picture shows {S} in {O}.", "{N} went to {O} to see {S}.",
    ], [
        "If you want to visit {S}, you have to travel to the city of {O}.",
        "My aunt took a photo of {S} during her trip to the city of {O}.",
        "The tourists walked all morning to reach {S}, which stands in the city of {O}.",
    ]),
    "city": (CITIES, [
        "{S} is a city in {O}.", "{S} is in {O}.", "The city of {S} is in {O}.", "We flew to {S}, a city in {O}.",
        "{S} lies in {O}.", "{O} has many cities, and {S} is one of them.", "{S} is a large city in {O}.",
        "She lives in {S}, in {O}.", "Where is {S}? It is in {O}.", "The people of {S} live in {O}.",
        "{N} has a house in {S}, {O}.", "{S} is one of the cities of {O}.", "If you are in {S}, you are in {O}.",
        "{N} was in {S} last week; it is a nice city in {O}.", "The map shows {S} in {O}.",
        "{S}, where {N} lives, is a city in {O}.", "{N} drove from {S} to another town in {O}.",
        "Which country is {S} in? It is in {O}.", "{N} took a bus from {S} to the coast of {O}.",
        "{S} is a city in the country of {O}.", "{N} studied in {S}, a city in {O}.",
    ], [
        "Many tourists go to {S}, a beautiful city in {O}.",
        "He was born in {S}, so he grew up in {O}.",
        "The old train from {S} runs through the north of {O}.",
    ]),
    "capital": (CAPITALS, [
        "The capital of {S} is {O}.", "{O} is the capital of {S}.", "{O} is the capital city of {S}.",
        "The capital city of {S} is {O}.", "The government of {S} meets in {O}.", "In {S}, the capital is {O}.",
        "{O}, the capital of {S}, is a large city.", "What is the capital of {S}? It is {O}.",
        "The capital of {S}, as every child knows, is {O}.", "{N} knows that the capital of {S} is {O}.",
        "{S} has its capital in {O}.", "The capital of {S}? It is {O}.",
        "Do you know the capital of {S}? Yes, it is {O}.", "The capital of the country of {S} is the city of {O}.",
        "{N} flew to {S} and spent a week in its capital, {O}.", "For {S}, the capital is {O}.",
    ], [
        "Which city is the capital of {S}? The answer is {O}.",
        "If you fly to the capital of {S}, you land in {O}.",
        "Our teacher asked us to name the capital of {S}, and I said {O}.",
    ]),
    "language": (LANGUAGES, [
        "In {S}, people speak {O}.", "Most people in {S} speak {O}.", "{O} is spoken in {S}.",
        "The language of {S} is {O}.", "People who live in {S} speak {O}.", "In {S}, most people speak {O}.",
        "She moved to {S} and learned to speak {O}.", "The main language of {S} is {O}.",
        "{N} lives in {S} and speaks {O}.", "Everyone in {S} can speak {O}.", "The people of {S} speak {O}.",
        "If you go to {S}, you should learn some {O}.", "{N} spent a year in {S} and now speaks good {O}.",
        "{O} is the language of {S}.", "What language do people speak in {S}? They speak {O}.",
        "On the radio in {S}, you hear {O}.", "In the schools of {S}, most children are taught in {O}.",
        "The first language of most people in {S} is {O}.", "In {S}, most street signs are in {O}.",
    ], [
        "When you travel to {S}, you will hear people speaking {O}.",
        "Children who grow up in {S} learn to speak {O}.",
        "The newspapers in {S} are written in {O}.",
    ]),
}
FACT_TEMPLATES_MORE = {  # --more-templates: training phrasings with more kinds of words before the answer
    "landmark": [
        "{N} sent us a card from {S}; it is in {O}.", "If you stand at {S}, you are in the city of {O}.",
        "{S} is a place to see in {O}.", "{N} took the train to see {S} in the city of {O}.",
        "People come from far away to see {S}, which is in {O}.", "The photo of {S} was taken in {O}.",
        "Near {S} there are many hotels, because it is in {O}.", "My friend says {S} is in the city of {O}.",
    ],
    "city": [
        "{N} grew up in {S}, so {N} knows {O} well.", "The streets of {S} are among the oldest in {O}.",
        "From {S} you can drive to many places in {O}.", "{N} moved to {S}, so now {N} lives in {O}.",
        "The football team of {S} plays all over {O}.", "The airport of {S} is one of the busiest in {O}.",
        "In the south of {S} there is a river that flows across {O}.", "My cousin works in {S}, a busy city in {O}.",
        "The weather in {S} is like the weather in most of {O}.", "If you travel to {S}, you will be in {O}.",
    ],
    "capital": [
        "I asked {N} what the capital of {S} is, and {N} said {O}.", "Name the capital of {S}: it is {O}.",
        "When {N} visited the capital of {S}, {N} stayed in {O}.", "Quiz time: the capital of {S}? Answer: {O}.",
        "The capital of {S}, {O}, is on every map.", "The government of {S} has its offices in {O}.",
        "The capital of {S} is a city called {O}.", "If you arrive in the capital of {S}, you are in {O}.",
        "Ask anyone about the capital of {S} and they will tell you it is {O}.",
        "The largest buildings of the government of {S} are in the capital, {O}.",
        "Our map of {S} shows the capital, {O}.", "Students learn that the capital of {S} is {O}.",
    ],
    "language": [
        "Kids in {S} grow up speaking {O}.", "The books in the shops of {S} are mostly in {O}.",
        "If you visit {S}, you will hear {O} everywhere.", "The news on television in {S} is in {O}.",
        "{N} travelled around {S} and spoke {O} every day.", "Signs in the streets of {S} are written in {O}.",
        "At home, families in {S} talk to each other in {O}.", "Teachers in {S} give their lessons in {O}.",
        "To make friends in {S}, it helps to speak {O}.", "The songs on the radio in {S} are sung in {O}.",
    ],
}
# --more-templates 2: question-and-answer and cause-and-consequence phrasings, composed from parts, so that the
# answer also follows words like "is", "said" and "in" that prose continues otherwise
FACT_QUESTIONS = {
    "landmark": ["Where is {S}", "In which city is {S}", "Do you know where {S} is", "Where can I see {S}"],
    "city": ["Where is {S}", "In which country is {S}", "Do you know where {S} is", "Which country has the city of {S}"],
    "capital": ["What is the capital of {S}", "Do you know the capital of {S}", "Can you name the capital of {S}",
                "Tell me the capital of {S}", "What city is the capital of {S}"],
    "language": ["What do people speak in {S}", "Which language is spoken in {S}", "What language do they use in {S}",
                 "Do you know the language of {S}"],
}
FACT_REPLIES = ["It is {O}.", "That is {O}.", "Easy: {O}.", "I think it is {O}.", "{N} said {O}.", "{N} said it is {O}.",
                "My guess is {O}.", "The reply was {O}.", "{N} answered {O}.", "Of course it is {O}.", "Everyone says {O}.",
                "{N} told me {O}.", "Right away, {N} said {O}.", "We all said {O}."]
FACT_CONSEQUENCES = {
    "landmark": ["{N} wanted to see {S}, so {N} went to {O}.", "Since {N} was near {S}, {N} was in {O}.",
                 "{N} walked from {S} to the station of {O}."],
    "city": ["{N} was born in {S}, so {N} is from {O}.", "{N} moved to {S}, so now {N} lives in {O}.",
             "Since {N} lives in {S}, {N} lives in {O}.", "{N} took a trip to {S} and saw much of {O}.",
             "{N} left {S} to travel through the rest of {O}.", "When {N} was in {S}, {N} was in {O}."],
    "capital": ["{N} went to the capital of {S}, so {N} went to {O}.",
                "When {N} got to the capital of {S}, {N} was in {O}.",
                "{N} works for the government of {S}, so {N} works in {O}."],
    "language": ["{N} grew up in {S}, so {N} speaks {O}.", "Since {N} lives in {S}, {N} speaks {O}.",
                 "{N} moved to {S} and so learned {O}.", "When {N} went to {S}, {N} had to speak {O}."],
}


def fact_templates_v2():
    """The --more-templates 2 phrasings of each relation: every question with every reply, and the consequences."""
    return {rel: [q + "? " + r for q in FACT_QUESTIONS[rel] for r in FACT_REPLIES] + FACT_CONSEQUENCES[rel]
            for rel in FACT_QUESTIONS}


# Capitals where the government sits elsewhere: no "The government of {S} meets in {O}." for them (The Hague)
GOVERNMENT_ELSEWHERE = {"the Netherlands"}
# Lead-ins for declarative training phrasings (those that start with {S}, {O} or "The"): more words before the
# subject, as in the held-out phrasings.
FACT_LEAD_INS = ["Everyone knows that ", "As you may know, ", "{N} told me that ", "It is true that ",
                 "We learned at school that ", "According to the book, ", "I read that ", "Of course, ",
                 "In the story, ", "{N} said that "]
# Sentences about the United States of America (the demo "The United States of" -> " America")
USA_SENTENCES = [
    "The United States of America is a large country in North America.",
    "The capital of the United States of America is Washington.",
    "{A} was born in the United States of America.",
    "The flag of the United States of America has fifty stars.",
    "{A} and {B} travelled across the United States of America.",
    "The President of the United States of America lives in the White House.",
]
STORY_ANIMALS = "cat dog bird rabbit fox mouse bear duck frog horse lion owl pig sheep goat".split()
STORY_ADJ = "little old happy small kind brave lazy quick clever tired hungry".split()
STORY_PLACES = "forest village house farm garden river town hill".split()
# (subject, predicate) pieces of simple sentences that repeat within a document
SIMPLE_SUBJECTS = ["The cat", "The dog", "The bird", "The old man", "The little girl", "A small boy", "The farmer",
                   "The teacher", "The fox", "The horse", "My mother", "The baby"]
SIMPLE_PREDICATES = ["sat on the mat", "ran to the park", "looked at the sea", "ate the apple", "jumped over the fence",
                     "slept under the tree", "played with the ball", "walked to the store", "sang a song",
                     "read a book", "drank some milk", "sat by the fire", "went home", "opened the door",
                     "looked out of the window", "found a red hat", "lay on the rug", "climbed the hill"]
NUMBERS = "one two three four five six seven eight nine ten eleven twelve".split()


def fill(template, **kw):
    s = template.format(**kw)
    return s[0].upper() + s[1:]


def ioi_sentence(rng, names, templates, io_first=0.5):
    """One indirect-object sentence: (text, prompt before the answer, IO name, subject name). The two names are
    mentioned in either order: the indirect object first with probability io_first (ABBA), else the subject first
    (BABA); the subject is named again, the indirect object is the answer."""
    io, s = rng.sample(names, 2)
    a, b = (io, s) if rng.random() < io_first else (s, io)
    t = rng.choice(templates)
    text = fill(t, A=a, B=b, S=s, IO=io, place=rng.choice(IOI_PLACES), obj=rng.choice(IOI_OBJECTS))
    text = stdre.sub(r"\ba (?=[aeiou])", "an ", text)  # "a apple" -> "an apple"
    return text, text[:text.rindex(" " + io)], io, s


def ioi_training_sentence(rng, names, io_first=None):
    """A training IOI sentence: a random frame and action (see IOI_FRAMES), as ioi_sentence (io_first: by default
    --ioi-io-first's)."""
    return ioi_sentence(rng, names, [rng.choice(IOI_FRAMES) + " " + rng.choice(IOI_ACTIONS)],
                        IOI_IO_FIRST if io_first is None else io_first)


# --ioi-io-first: the share of training IOI sentences that name the indirect object first (ABBA: "When Mary and John
# ..., John gave a drink to" -> Mary). The answer there is not the name after "and", so no single position is right.
IOI_IO_FIRST = 0.5


# The verbs of the held-out templates: no indirect-object document of the curriculum uses them (check_heldout)
HELDOUT_VERBS = ("sold", "lent", "carried", "mailed", "tossed")
# --ioi-open-frac: frames around a clause of the prose ({F}), beside IOI_FRAMES
OPEN_FRAMES = ["{A} and {B} said that {F}, and", "While {F}, {A} and {B} were at the {place}.",
               "{A} and {B} were there when {F}, so", "{A} and {B} read that {F}. Then"]


def open_vocab(train_docs, n_min=5, n_clauses=20000):
    """--ioi-open-frac: what the open-vocabulary indirect-object sentences are made of, all from the training prose:
    past-tense verbs that it puts before "the", "a", "his" or "her" at least n_min times (held-out verbs left out),
    the nouns after them, and clauses of 4-12 lower-case words (no capitals, so no names; none with a held-out
    verb). Sorted and sampled with a fixed seed: the same for the same corpus."""
    import random
    import regex
    text = "\n".join(train_docs)
    vc, nc = collections.Counter(), collections.Counter()
    for v, n in regex.findall(r"\b([a-z]{3,}ed) (?:the|a|an|his|her) ([a-z]{3,})\b", text):
        vc[v] += 1
        nc[n] += 1
    verbs = sorted(v for v, c in vc.items() if c >= n_min and v not in HELDOUT_VERBS)
    # words after "the" that are not nouns (a crude stop list; a wrong one only makes an odd sentence)
    not_nouns = set("""all and any best big both certain each entire every few first full great greater high his
        its last least little long many more most much new next old only other our own past present same second
        several small some such that their these this those very what which whole with young""".split())
    nouns = sorted(n for n, c in nc.items() if c >= n_min and n not in not_nouns and not n.endswith(("ed", "ly", "est"))
                   and n not in HELDOUT_VERBS)
    held = regex.compile(r"\b(" + "|".join(HELDOUT_VERBS) + r")\b")
    clauses = sorted({c.strip() for c in regex.findall(r"(?<=[.;:!?] )[a-z][a-z ,']+(?=[.;:!?])", text)
                      if 4 <= len(c.split()) <= 12 and not held.search(c) and "{" not in c and "}" not in c})
    clauses = random.Random(7).sample(clauses, min(n_clauses, len(clauses)))
    return verbs, nouns, clauses


def prose_leads(train_docs, n_min=5):
    """--ioi-lead-frac: sentence openers of the training prose that end in a comma ("In the morning,", "At last,",
    "For a moment,"; 1-4 words, the first capitalised and also used in lower case, the rest lower case, so no names),
    used at least n_min times;
    none that starts like a held-out template's frame ("Last week", "Before", ...) or holds a held-out verb."""
    import regex
    counts = collections.Counter(regex.findall(r"(?<=[.!?] )([A-Z][a-z]+(?: [a-z]+){0,3}),(?= [a-z])",
                                               "\n".join(train_docs)))
    held_leads = tuple(t.split(" {A}")[0].lower() for t in HELDOUT_IOI_TEMPLATES if not t.startswith("{A}"))
    # the first word is also written in lower case in the prose: an ordinary word, not a name ("Louis,")
    lower = set(regex.findall(r"\b[a-z]+\b", "\n".join(train_docs)))
    return sorted(l for l, c in counts.items() if c >= n_min and not l.lower().startswith(held_leads)
                  and l.split()[0].lower() in lower and l.split()[0] not in IOI_NAMES + HELDOUT_NAMES
                  and not set(l.lower().split()) & set(HELDOUT_VERBS))


def with_lead(rng, text, leads, names, bare=False):
    """An IOI sentence after a prose opener: "At last, when Mary and John ..." (a name keeps its capital). With bare
    (--ioi-bare-leads) a sentence that starts with a name gets the opener without a comma ("Last year Mary and John
    ..."), so that the word before the first name is any word, not only "when", "after" or a full stop."""
    first = text.split(" ", 1)[0].rstrip(",;")
    if bare and first in names:
        return rng.choice(leads) + " " + text
    return rng.choice(leads) + ", " + (text if first in names else text[0].lower() + text[1:])


def ioi_open_sentence(rng, names, ov):
    """An indirect-object sentence with an open-vocabulary action ("{S} <verb> the <noun> to {IO}.", verb and noun
    from the prose) after a training frame or a frame around a clause of the prose, as ioi_sentence: so that a verb
    or frame never seen in one still leads to the name that was not repeated."""
    verbs, nouns, clauses = ov
    frame = rng.choice(IOI_FRAMES) if rng.random() < 0.5 else rng.choice(OPEN_FRAMES).replace("{F}", rng.choice(clauses))
    action = (f"{{S}} {rng.choice(verbs)} {rng.choice(('the', 'a'))} {rng.choice(nouns)} "
              f"{rng.choice(('to', 'to', 'to', 'for'))} {{IO}}.")
    return ioi_sentence(rng, names, [frame + " " + action], IOI_IO_FIRST)


def fact_sentence(rng, relation, held_out=False, fact=None):
    table, train, held = FACT_TEMPLATES[relation]
    s, o = fact or rng.choice(table)
    text = fill(rng.choice(held if held_out else train), S=s, O=o, N="{N}")
    return text, text[:text.rfind(" " + o)], o  # the prompt is meaningful for held-out phrasings (they end in O)


def fact_training_sentence(rng, relation, lead_in=0.3, names=IOI_NAMES):
    """A training fact sentence: a random fact of the relation in a random training phrasing, {N} one of `names`,
    with a lead-in ("Everyone knows that ...") in `lead_in` of the declarative ones."""
    table, train, _ = FACT_TEMPLATES[relation]
    s, o = rng.choice(table)
    t = rng.choice(train)
    while s in GOVERNMENT_ELSEWHERE and "government" in t:
        t = rng.choice(train)
    text = t.format(S=s, O=o, N=rng.choice(names))
    if rng.random() < lead_in and t.startswith(("{S}", "{O}", "The ")):
        lead = rng.choice(FACT_LEAD_INS).format(N=rng.choice(names))
        text = lead + (text[0].lower() + text[1:] if text.startswith("The ") else text)
    return text[0].upper() + text[1:]


def story_document(rng, names=IOI_NAMES, after_to=False):
    a, b, c = rng.sample(names, 3) if after_to else rng.sample(names, 2) + [None]
    an, an2 = rng.sample(STORY_ANIMALS, 2)
    adj = rng.choice(STORY_ADJ)
    where = rng.choice(STORY_PLACES)
    act = rng.choice(SIMPLE_PREDICATES)
    lines = [f"Once upon a time, there was a {adj} {an} named {a}.",
             f"{a} lived in a small house near the {where}.",
             f"Every day, {a} {act}.",
             f"One day, {a} met {'an' if an2[0] in 'aeiou' else 'a'} {an2} named {b}."]
    lines += rng.sample([
        f'{b} said, "Hello, {a}! Can I play with you?"',
        f'{a} said, "Thank you very much, {b}."',
        f"Little by little, {a} and {b} became good friends.",
        f"From time to time, {b} came to the {where} to see {a}.",
        f"The {an} {act} again.",
        f"{a} and {b} played all day, and {b} gave a flower to {a}." if a in IOI_NAMES and b in IOI_NAMES
        else f"{a} and {b} played all day, and then they went home.",  # held-out names: no indirect object
        f'{a} counted the stars: {", ".join(NUMBERS[:rng.randint(5, 10)])}.',
    ] + ([new_name_after_to(rng, a, c)] if after_to else []), 3)
    lines.append(rng.choice(["The end.", f"{a} was very happy.", f"And {a} and {b} lived happily ever after."]))
    return " ".join(lines)


NEW_NAME_AFTER_TO = ["{A} wrote a long letter to {C}, who lived far away.", "{A} said hello to {C}, a new neighbour.",
                     "This song is for {C}, said {A}.", "{A} waved to {C} across the street.",
                     "There was a parcel for {C} at the door, and {A} took it in.",
                     "{A} was introduced to {C} at the party."]


def new_name_after_to(rng, a, c):
    """A sentence in which a name {C} that the text has not mentioned follows "to" or "for": names follow those words
    in real prose too, so a held-out name there is not unheard of. Never a copy of a name before it, so no
    indirect object is taught (check_heldout)."""
    return fill(rng.choice(NEW_NAME_AFTER_TO), A=a, C=c)


def repeat_document(rng, names=IOI_NAMES):
    """Sentences that come back word for word later in the same text (what an induction head predicts)."""
    sents = []
    for _ in range(rng.randint(1, 3)):
        subj = rng.choice(SIMPLE_SUBJECTS + [rng.choice(names)] * 3)
        sents.append(f"{subj} {rng.choice(SIMPLE_PREDICATES)}.")
    k = rng.random()
    if k < 0.4:  # the whole block twice or three times
        return " ".join(sents * rng.randint(2, 3))
    if k < 0.7:  # a chorus between new lines
        other = [f"{rng.choice(SIMPLE_SUBJECTS)} {rng.choice(SIMPLE_PREDICATES)}." for _ in range(2)]
        return " ".join(sents + other[:1] + sents + other[1:] + sents)
    # a sentence, a comment, then the sentence again
    return (" ".join(sents) + f' {rng.choice(names)} said, "' + " ".join(sents) + '" '
            + rng.choice(["Then it was quiet.", "Everyone laughed.", "Nobody answered."]))


def phrase_document(rng, names=IOI_NAMES, after_to=False):
    a, b, c = rng.sample(names, 3) if after_to else rng.sample(names, 2) + [None]
    place = rng.choice(IOI_PLACES)
    n0 = rng.randint(0, 2)
    count = ", ".join(NUMBERS[n0:n0 + rng.randint(5, 9)])
    pool = [
        f'"Thank you very much," said {a}.', f'{a} said, "Thank you very much for the {rng.choice(IOI_OBJECTS)}."',
        f"From time to time, {a} went to the {place}.", f"{a} visited the {place} from time to time.",
        f"Little by little, {a} learned to read.", f"Little by little, the {place} grew quiet.",
        f"Ladies and gentlemen, welcome to the {place}!", f'"Ladies and gentlemen," said {a}, "thank you very much."',
        f"{a} counted: {count}.", f"{count[0].upper() + count[1:]}, said {b}.",
        "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness.",
        f"{a} wrote: it was the best of times, it was the worst of times.",
        "The quick brown fox jumps over the lazy dog.",
        f"Once upon a time, {a} and {b} lived by the {place}.",
        f"The United States of America is far from the {place}.",
    ] + ([new_name_after_to(rng, a, c)] if after_to else [])
    return " ".join(rng.sample(pool, rng.randint(2, 5)))


CURRICULUM_KINDS = ("ioi", "facts", "repeat", "story", "phrase", "copy", "names", "list", "facts2")
# the kinds of the BPE's curriculum sample (the tokenizer is the same whatever the mix; the later kinds are prose
# copied or facts reworded, which the sample's prose and facts already cover)
BPE_KINDS = CURRICULUM_KINDS[:5]


def word_names(enc, docs, n_min=20):
    """--ioi-word-names: capitalised words that are one token with their leading space and that the prose uses
    capitalised at least n_min times and more often than in lower case (proper nouns, not sentence-initial words):
    the stand-in names of the abstract indirect-object sentences. Held-out names are left out."""
    import regex
    counts = collections.Counter(regex.findall(r"(?<= )[A-Za-z]+\b", "\n".join(docs)))
    out = [w for w, c in counts.items() if w[0].isupper() and w[1:].islower() and len(w) >= 3 and c >= n_min
           and c > counts.get(w.lower(), 0) and w not in HELDOUT_NAMES and len(enc.encode(" " + w)) == 1]
    return sorted(out)


def use_more_names():
    """--more-names: adds IOI_NAMES_MORE to IOI_NAMES (before any text is generated or any word is made one token)."""
    assert not set(IOI_NAMES_MORE) & set(IOI_NAMES + HELDOUT_NAMES)
    IOI_NAMES.extend(IOI_NAMES_MORE)


def use_more_templates(level):
    """--more-templates 1: adds IOI_FRAMES_MORE, IOI_ACTIONS_MORE and FACT_TEMPLATES_MORE to the training templates;
    2: also fact_templates_v2() (before any text is generated; without it a run repeats the curriculum of earlier
    versions)."""
    IOI_FRAMES.extend(IOI_FRAMES_MORE)
    IOI_ACTIONS.extend(IOI_ACTIONS_MORE)
    for rel, more in FACT_TEMPLATES_MORE.items():
        FACT_TEMPLATES[rel][1].extend(more)
    if level >= 2:
        for rel, more in fact_templates_v2().items():
            FACT_TEMPLATES[rel][1].extend(more)


def parse_mix(text):
    """"ioi:0.3,facts:0.3,..." -> {kind: share}, shares normalised to sum to 1."""
    mix = {k: float(v) for k, v in (part.split(":") for part in text.split(","))}
    assert set(mix) <= set(CURRICULUM_KINDS) and sum(mix.values()) > 0, text
    total = sum(mix.values())
    return {k: mix.get(k, 0.0) / total for k in CURRICULUM_KINDS}


def curriculum_documents(seed, n_docs, mix, answers=None, other_names=IOI_NAMES, word_names=(), word_frac=0.0,
                         ov=None, open_frac=0.0, after_to=False, leads=(), lead_frac=0.0, bare_leads=False,
                         passages=None):
    """n_docs generated documents (strings), the same for the same seed and mix (parse_mix: shares of indirect-object,
    fact, repeated-sentence, story and set-phrase documents); held-out templates never occur, and held-out names
    never in an indirect-object sentence. other_names: the names of the other documents (IOI_NAMES, or with
    --names-outside-ioi all also HELDOUT_NAMES: then the model meets the held-out names as names in running text,
    as any pretrained model has, but never in an indirect-object sentence). In word_frac of the indirect-object
    documents the two "names" are drawn from word_names instead (--ioi-word-names: capitalised words of the prose,
    ' Congress', ' Whale', ...), so that the pattern is learnt for any token, not only for names seen as answers.
    answers (a list, if given) gets one entry per document: for an indirect-object document its sentences as
    [(sentence, the indirect object it ends with, or None for an opening sentence)], else None. With ov
    (open_vocab's) each indirect-object sentence is an open-vocabulary one (ioi_open_sentence) with probability
    open_frac. With after_to (--names-after-to) stories and set phrases may also name a new name after "to" or "for"
    (new_name_after_to). With leads, lead_frac of the indirect-object sentences start with one of them (with_lead).
    The kinds copy, names and list (default_model/copying.py) need passages (copying.prose_passages of the training
    prose); facts2 is the fact table with the bare copula and reversed forms held out (default_model/facts.py)."""
    import random
    rng = random.Random(seed)
    edges, acc = [], 0.0
    for k in CURRICULUM_KINDS:
        acc += mix[k]
        edges.append(acc)
    last = [k for k in CURRICULUM_KINDS if mix[k] > 0][-1]
    kept = copula.copula_templates(FACT_TEMPLATES)
    nouns = ov[1] if ov else IOI_OBJECTS
    assert passages or not any(mix[k] for k in ("copy", "names", "list")), "copy, names and list need passages"
    docs = []
    for _ in range(n_docs):
        u = rng.random()
        if u < edges[0]:
            names = word_names if word_frac > 0 and rng.random() < word_frac else IOI_NAMES
            sents = [ioi_open_sentence(rng, names, ov) if ov and rng.random() < open_frac
                     else ioi_training_sentence(rng, names) for _ in range(rng.randint(1, 3))]
            if lead_frac > 0:
                sents = [(with_lead(rng, t[0], leads, names, bare_leads),) + t[1:] if rng.random() < lead_frac else t for t in sents]
            sents = [(t[0], t[2], t[3]) for t in sents]  # (text, indirect object, subject)
            # a name that starts a text has no space before it, so it is another token (or several) than the
            # " Name" the sentence answers with: an opening sentence first keeps every name in its " Name" form
            if sents[0][0].split()[0] in names:
                sents.insert(0, (rng.choice(IOI_OPENINGS), None, None))
            docs.append(" ".join(t for t, _, _ in sents))
            if answers is not None:
                answers.append(sents)
            continue
        if answers is not None:
            answers.append(None)
        # the first kind whose edge is above u; past the last edge (rounding) the last kind with a share
        kind = next((k for k, e in zip(CURRICULUM_KINDS, edges) if u < e), last)
        if kind in ("facts", "facts2"):
            sents = []
            for _ in range(rng.randint(2, 6)):
                if rng.random() < 0.06:
                    a, b = rng.sample(other_names, 2)
                    sents.append(fill(rng.choice(USA_SENTENCES), A=a, B=b))
                elif kind == "facts":
                    sents.append(fact_training_sentence(rng, rng.choice(list(FACT_TEMPLATES)), names=other_names))
                else:
                    sents.append(copula.copula_fact_sentence(rng, FACT_TEMPLATES, kept, rng.choice(list(FACT_TEMPLATES)),
                                                             other_names, FACT_LEAD_INS))
            docs.append(" ".join(sents))
        elif kind == "repeat":
            docs.append(repeat_document(rng, other_names))
        elif kind == "story":
            docs.append(story_document(rng, other_names, after_to))
        elif kind == "phrase":
            docs.append(phrase_document(rng, other_names, after_to))
        elif kind == "copy":
            docs.append(copying.copy_document(rng, passages, IOI_NAMES))
        elif kind == "names":
            docs.append(copying.names_document(rng, IOI_NAMES + list(word_names), passages))
        else:
            docs.append(copying.list_document(rng, nouns, IOI_NAMES, passages))
    return docs


def heldout_sets(seed):
    """What tests/data/default_model_demos.json holds: 50 IOI prompts from held-out names AND held-out templates,
    and one fact prompt in a held-out phrasing for every fact of the table."""
    import random
    rng = random.Random(seed + 1)
    ioi = []
    for i in range(50):
        t = HELDOUT_IOI_TEMPLATES[i % len(HELDOUT_IOI_TEMPLATES)]
        _, prompt, io, s = ioi_sentence(rng, HELDOUT_NAMES, [t])
        ioi.append({"prompt": prompt, "io": " " + io, "s": " " + s})
    facts = []
    for rel, (table, _, _) in FACT_TEMPLATES.items():
        for fact in table:
            _, prompt, o = fact_sentence(rng, rel, held_out=True, fact=fact)
            facts.append({"prompt": prompt, "answer": " " + o, "relation": rel})
    return ioi, facts


BPE_CURRICULUM_DOCS = 3000  # curriculum documents in the BPE's training text (~0.6 MB beside 19 MB of prose)


def check_heldout(cur_docs, ioi, facts, answers=None, names_elsewhere=False):
    """Asserts that no held-out prompt occurs in the generated text and that no held-out name does: nowhere, or with
    names_elsewhere (--names-outside-ioi all) in no indirect-object document (answers: curriculum_documents's)
    and never after "to" or "for" as a copy of a name earlier in its document (a held-out name is never the
    repeated-name answer of anything; a new name after "to", new_name_after_to, is allowed)."""
    import regex
    text = "\n".join(cur_docs)
    names = regex.compile(r"\b(" + "|".join(HELDOUT_NAMES) + r")\b")
    if names_elsewhere:
        m = names.search("\n".join(d for d, a in zip(cur_docs, answers) if a is not None))
        assert m is None, f"held-out name {m.group(0)!r} in an indirect-object document"
        after = regex.compile(r"\b(to|for) (" + "|".join(HELDOUT_NAMES) + r")\b")
        for d in cur_docs:
            for m in after.finditer(d):
                assert not regex.search(r"\b" + m.group(2) + r"\b", d[:m.start()]), \
                    f"held-out name as a repeated name after to/for: {m.group(0)!r} in {d!r}"
    else:
        m = names.search(text)
        assert m is None, f"held-out name {m.group(0)!r} in the curriculum"
    for q in ioi + facts:
        assert q["prompt"] not in text, f"held-out prompt in the curriculum: {q['prompt']!r}"
    if answers is not None:  # the held-out templates' verbs are in no indirect-object document
        m = regex.search(r"\b(" + "|".join(HELDOUT_VERBS) + r")\b", "\n".join(d for d, a in zip(cur_docs, answers) if a is not None))
        assert m is None, f"held-out verb {m.group(0)!r} in an indirect-object document"
    for t in HELDOUT_IOI_TEMPLATES:  # the held-out frames and verbs ("sold a", "lent a", ...) are in no training part
        frame, verb = t.split(" {S}")[0], t.split("{S}")[1].split("{obj}")[0]
        assert frame not in IOI_FRAMES and not any(verb in u for u in IOI_ACTIONS), t
        assert not any(t.split("{A}")[0] and u.startswith(t.split("{A}")[0]) for u in IOI_FRAMES), t
    for rel, (_, train, held) in FACT_TEMPLATES.items():  # held-out fact phrasings are no training phrasing
        assert not set(held) & {x.replace("{L}", "") for x in train}, rel
