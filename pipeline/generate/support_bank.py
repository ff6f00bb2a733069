"""Support tickets: per topic, questions paired with their short answers, and extra steps."""

# Per topic: (customer question, the short answer to exactly that question) pairs, and extra steps.
SUPPORT_TOPICS: dict[str, dict[str, tuple[str, ...]]] = {
    "billing": {
        "ask": (
            "I was charged twice for my {plan} plan this month.",
            "My latest invoice says {amount} but my plan should cost less.",
            "Why did my subscription renew at a higher price?",
            "I cancelled last week but I still got billed {amount}.",
            "Can I switch from monthly to annual billing and keep my discount?",
        ),
        "short": (
            "I've refunded the duplicate charge of {amount}; it shows up in 3-5 business days.",
            "Your invoice included a one-off seat adjustment; I've credited {amount} back.",
            "Your plan renewed at the new list price; I applied a loyalty credit of {amount}.",
            "The cancellation went through after the billing date, so I've reversed the {amount} charge.",
            "Yes, switch to annual billing from Settings > Billing and the discount carries over.",
        ),
        "steps": (
            "Open Settings > Billing to see every charge on the account.",
            "Refunds go back to the original payment method.",
            "Banks usually post the reversal within five business days.",
            "You'll get an email receipt once the credit is applied.",
            "If the amount still looks wrong next week, reply here and I'll escalate it to finance.",
        ),
    },
    "shipping": {
        "ask": (
            "Where is my order #{order}? It was supposed to arrive on Monday.",
            "The tracking for order #{order} hasn't updated in four days.",
            "My package arrived damaged, the box was crushed.",
            "Can I change the delivery address for order #{order}?",
            "I received the wrong size in order #{order}.",
        ),
        "short": (
            "Order #{order} is with the carrier and should arrive by Thursday.",
            "The carrier lost the scan for #{order}; I've sent a replacement with express shipping.",
            "Sorry about the damage, a replacement ships today at no cost.",
            "I've updated the delivery address for #{order}; the carrier confirms the change.",
            "I've sent the right size today and emailed you a prepaid return label.",
        ),
        "steps": (
            "You can follow the parcel from the link in your confirmation email.",
            "Carriers sometimes skip scans at the sorting hub, so a pause is normal.",
            "Keep the damaged item until the replacement arrives in case the carrier asks for photos.",
            "A prepaid return label is attached to this message.",
            "Express replacements usually arrive within two business days.",
        ),
    },
    "login": {
        "ask": (
            "I can't log in, it keeps saying my password is wrong.",
            "The two-factor code never arrives on my phone.",
            "My account got locked after too many attempts.",
            "How do I change the email address I use to sign in?",
            "The app logs me out every few minutes.",
        ),
        "short": (
            "I've sent a reset link; use it to set a new password within the hour.",
            "Switch two-factor to the authenticator app; SMS codes are delayed for your carrier.",
            "Your account is unlocked now; wait 15 minutes before the next attempt.",
            "Go to Profile > Security > Email to change your sign-in address.",
            "Update to the latest app version; it fixes the session timeout that logs you out.",
        ),
        "steps": (
            "Request a reset link from the sign-in page and open it within one hour.",
            "Clear the app cache if the old session keeps coming back.",
            "Authenticator codes work offline, so they are more reliable than SMS.",
            "We never ask for your password by email or chat.",
            "You can see active sessions under Profile > Security and sign them out.",
        ),
    },
    "api": {
        "ask": (
            "Our webhook calls return 401 since this morning.",
            "The /v2/export endpoint times out for large workspaces.",
            "Is there a rate limit on the search API? We get 429 errors.",
            "Can you review this retry loop? `for i in range(10): requests.post(url, json=body)`",
            "Our SDK upgrade broke pagination in the list endpoint.",
        ),
        "short": (
            "The webhook secret was rotated; update it in your integration settings.",
            "Use the async export job for workspaces over 10,000 records.",
            "The search API allows 60 requests per minute per token; back off on 429.",
            "Add exponential backoff and only retry on 5xx or timeouts, not on 4xx.",
            "Pagination now uses the `next_cursor` field instead of page numbers.",
        ),
        "steps": (
            "Check the `X-RateLimit-Remaining` header before sending bursts.",
            "Log the response body on failure; it includes a request id we can trace.",
            "Retrying a non-idempotent POST can create duplicates, so send an idempotency key.",
            "The changelog for v2.4 lists every breaking change.",
            "Test against the sandbox workspace before rolling out.",
        ),
    },
    "account": {
        "ask": (
            "How do I add a teammate to our workspace?",
            "Please delete my account and all my data.",
            "Can I transfer ownership of the workspace to {name}?",
            "I need an export of everything we stored last year.",
            "How do I turn off the weekly digest emails?",
        ),
        "short": (
            "Invite teammates from Settings > Members; they get an email link.",
            "I've scheduled the deletion; it completes within 30 days as required.",
            "Ownership can move to {name} once they accept the admin role.",
            "Request the export from Settings > Privacy; it arrives as a ZIP within an hour.",
            "Turn off the digest under Notifications > Email.",
        ),
        "steps": (
            "Admins can set roles when sending the invitation.",
            "A data export is available from Settings > Privacy before deletion.",
            "The previous owner keeps admin rights unless you remove them.",
            "Exports contain one CSV file per table.",
            "Notification settings are per person, not per workspace.",
        ),
    },
}
