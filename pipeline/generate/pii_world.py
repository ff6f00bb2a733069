"""The labelled PII corpus beyond English (issue 50): national ids of 26 formats (valid checksums),
names in 13 scripts and in lower case, postcodes beside places, Chinese mobiles, every obfuscation
a value may be written with (full-width, zero-width, bidi marks, soft hyphens, percent-encoded),
and a look-alike corpus of 120 texts that hold none (pipeline/generate/pii_corpus.py merges them).
"""

from __future__ import annotations

# (what people call it, the value): each valid for its format (python-stdnum; GB NINO by shape).
NATIONAL_IDS: tuple[tuple[str, str], ...] = (
    ("ITIN", "912-70-3456"),
    ("DNI", "12345678Z"),
    ("NIE", "X2482300W"),
    ("numéro de sécurité sociale", "1 84 12 76 451 089 46"),
    ("Aadhaar", "2345 6789 0124"),
    ("PAN", "ACUPA7085R"),
    ("Steuer-ID", "36 574 261 809"),
    ("codice fiscale", "RCCMNL83S18D969H"),
    ("BSN", "1112.22.333"),
    ("rijksregisternummer", "85.07.30-033.28"),
    ("CPF", "390.533.447-05"),
    ("resident ID", "11010519491231002X"),
    ("PESEL", "44051401359"),
    ("personnummer", "880320-0016"),
    ("CPR", "211062-5629"),
    ("henkilötunnus", "131052-308T"),
    ("fødselsnummer", "151086 95088"),
    ("SIN", "123 456 782"),
    ("CURP", "BOXW310820HNERXN09"),
    ("RRN", "971013-9019902"),
    ("ID number", "7503305044089"),
    ("AHV", "756.9217.0769.85"),
    ("PPSN", "6433435F"),
    ("CNP", "1630615123457"),
    ("National Insurance number", "QQ 12 34 56 C"),
    ("Steuer-ID", "36574261809"),  # bare: found by its context word
)
ID_TEMPLATES = ("My {label} is {v}.", "{label}: {v} — please update my file.")
# Ids with a shape of their own are found without the word that names them.
SHAPED_IDS = (
    "12345678Z", "X2482300W", "1 84 12 76 451 089 46", "2345 6789 0124", "ACUPA7085R",
    "RCCMNL83S18D969H", "1112.22.333", "390.533.447-05", "880320-0016", "131052-308T",
    "BOXW310820HNERXN09", "971013-9019902", "756.9217.0769.85", "QQ 12 34 56 C",
)  # fmt: skip
SHAPED_TEMPLATE = "Please update the record with {v} today."

# Names in 13 scripts (Faker's lists know these words), each with a sentence of its language.
SCRIPT_NAMES: tuple[tuple[str, str], ...] = (
    ("محمد الأحمد", "تحدثت مع {v} اليوم."),
    ("خالد العلي", "أرسل العقد إلى {v} من فضلك."),
    ("王小明", "联系人：{v}。"),
    ("张伟", "请把合同发给{v}。"),
    ("李秀英", "{v}女士明天到。"),
    ("田中太郎", "{v}さんに連絡してください。"),
    ("김서영", "{v} 씨에게 연락하세요."),
    ("Γιώργος Παπαδόπουλος", "Μίλησα με τον {v} σήμερα."),
    ("דוד כהן", "דיברתי עם {v} היום."),
    ("राहुल शर्मा", "मैंने आज {v} से बात की।"),
    ("ศศิธร เนื้อนุ่ม", "ติดต่อ {v} พรุ่งนี้"),
    ("Иван Петров", "Я говорил с {v} сегодня."),
    ("Nguyễn Văn Minh", "Tôi đã gặp {v} hôm qua."),
    ("Zeynep Yılmaz", "Bugün {v} ile konuştum."),
    ("Łukasz Wiśniewski", "Rozmawiałem dzisiaj z {v}."),
    ("রাজ মুখার্জি", "আমি আজ {v} এর সাথে কথা বলেছি।"),
    ("sarah connor", "tell {v} the order shipped"),
    ("maria garcia", "i met {v} at the station yesterday"),
)
# A postcode beside its place is one value: the place's placeholder takes it in.
POSTCODE_PLACES = (
    "10115 Berlin", "75001 Paris", "28013 Madrid", "1012 AB Amsterdam", "114 55 Stockholm",
    "1000-001 Lisbon", "00-950 Warsaw", "01310-100 São Paulo", "Ottawa, ON K1A 0B1",
    "8001 Zurich",
)  # fmt: skip
POSTCODE_TEMPLATES = ("Send it to our office at {v}, please.", "We moved to {v} last year.")
CN_PHONES = ("13812345678", "+86 138 1234 5678", "+86 10 6552 9988")
# Values written to slip past a detector: each must go whole.
OBFUSCATED: dict[str, tuple[str, ...]] = {
    "email": (
        "jane＠example.com",  # a full-width @
        "ｊａｎｅ.ｄｏｅ@example.com",  # full-width letters
        "jane%40example.com",  # percent-encoded, as in a URL
        "jane\u200b.doe@example.com",  # a zero-width space
        "jane.doe@exa\u00admple.com",  # a soft hyphen
        "jane.doe@\u200eexample.com",  # a left-to-right mark
    ),
    "phone": (
        "+1\u200b415\u200b555\u200b0199",
        "%2B14155550100",
        "＋３３ ６ １２ ３４ ５６ ７８",  # full-width digits
        "+44\u2066 20 7946 0958\u2069",  # a bidi isolate around the number
        "06\u00ad12\u00ad34\u00ad56\u00ad78",
    ),
    "card": ("4111\u200b1111\u200b1111\u200b1111", "４１１１ １１１１ １１１１ １１１１"),
    "iban": ("DE89\u00ad3704 0044 0532 0130 00",),
    "national_id": ("QQ\u200b12\u200b34\u200b56\u200bC", "１２３４５６７８Ｚ"),
    "ssn": ("536\u200c-90-4399",),
}
OBFUSCATED_TEMPLATES = {
    "email": "Write to {v} about it.",
    "phone": "Call me back on {v} please.",
    "card": "The charge was on my card {v}.",
    "iban": "Please refund to IBAN {v}.",
    "national_id": "My id is {v}.",
    "ssn": "My SSN is {v}.",
}
URLS = (  # (kind, URL, the value in it)
    ("email", "https://crm.example/contact?to=jane%40example.com&src=mail", "jane%40example.com"),
    ("phone", "https://crm.example/call?tel=%2B14155550100", "%2B14155550100"),
)

# Texts that hold no personal data: products, versions, order/ticket/tracking numbers (several
# pass a weak checksum: Luhn, mod 11), common words that are also names, dates, prices, hex ids,
# and sentences in 12 languages. Every one should come out unchanged.
LOOK_ALIKES_WORLD: tuple[str, ...] = (
    # products and brands
    "The Apple Watch Series 9 and the Echo Dot are on sale.",
    "Open the link in Safari or Firefox.",
    "We moved the team from Slack to Microsoft Teams.",
    "The Model 3 and the Pixel 8 Pro were reviewed this week.",
    "Install Docker Desktop 4.27 before the workshop.",
    "Our plan includes Zoom, Notion and Figma seats.",
    "The Kindle Paperwhite battery lasts for weeks.",
    "The Galaxy S24 Ultra ships with Android 14.",
    "Try the Harmony remote with the Echo Show.",
    "Amazon Prime Day starts on Tuesday.",
    # versions and builds
    "Upgrade to v2.10.3 before Friday.",
    "iOS 17.4.1 fixed the crash on launch.",
    "We run Python 3.12.1 with numpy 2.4.6 and polars 2.1.0.",
    "Build 2026.11.02-rc1 is on the staging server.",
    "Kernel 6.8.0-45-generic is installed.",
    "Release 10.0.19045.3803 of the OS is required.",
    "Set the timeout to 30s in config v4.",
    "The API v1 endpoint is deprecated since 2.0.",
    # order, ticket, tracking numbers (some pass Luhn or mod 11)
    "Order 44051401359 was delivered.",
    "Ticket 123456782 is waiting for a reply.",
    "Invoice 36574261809 is attached.",
    "Tracking number 1Z999AA10123456784 is out for delivery.",
    "Reference 880320-0016 was filed yesterday.",
    "Order #2345 6789 0124 is packed.",
    "Case 390.533.447-05 is closed.",
    "SKU 12345678Z is out of stock.",
    "Booking 44051401359 is confirmed.",
    "Serial 151086 95088 on the back of the device.",
    "Item 1112.22.333 was returned.",
    "Confirmation 211062-5629 arrived by mail.",
    "Your receipt 6433435F is in the app.",
    "Ticket #971013-9019902 was merged.",
    "Order no. 11010519491231002X was cancelled.",
    # counts, prices, dates, times, hex ids
    "We processed 44051401359 events last quarter.",
    "The total was 1,234,567.89 EUR including tax.",
    "It costs ¥12,800 or €99.99 a year.",
    "The sale runs from 2026-11-02 to 2026-11-30.",
    "Meet at 14:30 on 12.11.2026 in room 4.12.",
    "Commit 3d11a5eb706a fixed it; see 0x7ffd5e8c.",
    "The hash is 9f86d081884c7d659a2feaa0c55ad015.",
    "UUID 550e8400-e29b-41d4-a716-446655440000 was reused.",
    "Our office has 10115 square feet.",
    "The stadium holds 75001 people.",
    "We shipped 12345 units in 2019.",
    "Score: 98765 points after level 12.",
    "Pay 1 234,50 € before 31/12/2026.",
    # common words that are also names
    "Will you send the report today?",
    "May I ask a question about the plan?",
    "Echo the message back to the client.",
    "The grace period ends on Monday.",
    "Mark the ticket as solved.",
    "We need to bill the client by June.",
    "Hope this helps, let me know.",
    "Summer sale ends in August.",
    "Rose gold is out of stock.",
    "The fine china set arrived broken.",
    "An apple a day keeps the doctor away.",
    "I will grace the event with a short talk.",
    "rich text is not supported in the summary.",
    "we need more rose oil and olive oil.",
    "please mark down the price of the amber lamp.",
    "the bill was paid and the price is fine.",
    "the ginger cat sat by the window.",
    "set the page size to a4.",
    "the will was read in court.",
    "use the brown paper for the parcel.",
    "pearl white and ruby red are new colours.",
    "jack up the car before you change the tyre.",
    "the crystal glass is fragile.",
    "a young king and an old queen in the play.",
    "the long grass near the river bank",
    # multilingual sentences without personal data
    "شكرا لك على المساعدة في الطلب.",
    "الاجتماع يوم الاثنين في المكتب.",
    "我们明天开会讨论这个问题。",
    "这个产品很好，价格也合理。",
    "我爱北京天安门。",
    "中国的经济增长很快。",
    "高兴认识你！",
    "王国的历史很长。",
    "金融市场今天很稳定。",
    "東京で会議があります。",
    "明日は雨が降るでしょう。",
    "新しいバージョンをインストールしてください。",
    "이야기를 나누어서 좋았습니다.",
    "내일 회의가 있습니다.",
    "주문이 배송되었습니다.",
    "Η παραγγελία σας στάλθηκε σήμερα.",
    "Ευχαριστώ για τη βοήθεια.",
    "ההזמנה שלך נשלחה היום.",
    "תודה רבה על העזרה.",
    "आपका ऑर्डर आज भेज दिया गया है।",
    "कृपया नया संस्करण इंस्टॉल करें।",
    "ขอบคุณสำหรับความช่วยเหลือ",
    "คำสั่งซื้อของคุณถูกจัดส่งแล้ว",
    "Ваш заказ отправлен сегодня.",
    "Спасибо за помощь с обновлением.",
    "Siparişiniz bugün kargoya verildi.",
    "Teşekkürler, yardımınız için.",
    "Zamówienie zostało wysłane dzisiaj.",
    "Dziękuję za pomoc w aktualizacji.",
    "Đơn hàng của bạn đã được gửi hôm nay.",
    "Cảm ơn bạn đã giúp đỡ.",
    "Ihre Bestellung wurde heute versandt.",
    "Votre commande a été expédiée aujourd'hui.",
    "Su pedido fue enviado hoy.",
    "O seu pedido foi enviado hoje.",
    "Il tuo ordine è stato spedito oggi.",
    "Uw bestelling is vandaag verzonden.",
    "Din beställning skickades i dag.",
    # obfuscation characters with nothing behind them
    "Ｗｅｌｃｏｍｅ ｂａｃｋ！",
    "100% of the tests pass, 50%OFF today.",
    "Discount code SAVE%20NOW is invalid.",
    "The word co\u00adoperate has a soft hyphen.",
    "Emoji 👩\u200d💻 joined the channel.",
    "Right-to-left \u200fmarks\u200f in the title.",
    "A value of 1\u200b000 was entered.",
    "Version ２.３.１ is live.",
)
