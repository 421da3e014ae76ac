"""The inspector in a real browser: Debian's chromium driven by Selenium (chromedriver), against a
real Engram server process (tests/api/live.py) seeded with the demo data. Screenshots land in
.engram/screenshots/ (ignored by git, so a test run leaves the tree as it was), or in
ENGRAM_SCREENSHOTS_DIR: ``ENGRAM_SCREENSHOTS_DIR=docs/screenshots scripts/test
tests/inspector/test_browser.py`` refreshes the README's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tenants import audit_chain
from tests.api.live import ROOT, LiveEngram

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="chromium + chromedriver not installed (scripts/test installs them with apt)")
SHOTS = Path(os.environ.get("ENGRAM_SCREENSHOTS_DIR") or ROOT / ".engram" / "screenshots")


@pytest.fixture(scope="module")
def live(tmp_path_factory, es_admin):
    server = LiveEngram(tmp_path_factory.mktemp("inspector"), ENGRAM_USAGE_FLUSH_SECONDS="0.5")
    try:
        server.setup()
        server.manage("seed_demo")
        server.start()
        server.password = (server.workdir / "secrets" / "demo-password").read_text().strip()
        server.agent_token = (server.workdir / "secrets" / "demo-agent-token").read_text().strip()
        alice = server.manage("shell", "-c", "from tenants.models import Subject; "
                                             "print(Subject.objects.get(external_id='alice@example.com').user_id)")
        server.alice = alice.strip().splitlines()[-1]
        dana = server.manage("shell", "-c", "from tenants.models import Subject; "
                                            "print(Subject.objects.get(external_id='dana@example.com').user_id)")
        server.dana = dana.strip().splitlines()[-1]
        yield server
    finally:
        server.stop()
        server.cleanup(es_admin)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    downloads = tmp_path_factory.mktemp("downloads")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1366,900",
                "--force-device-scale-factor=1", "--lang=en-GB"):
        options.add_argument(arg)
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Europe/Berlin"})
    driver.downloads = downloads
    yield driver
    driver.quit()


def _wait(driver, condition, timeout: float = 10):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # A form post replaces the page: an element read mid-navigation is stale, so read again.
    return WebDriverWait(driver, timeout, poll_frequency=0.1,
                         ignored_exceptions=(StaleElementReferenceException,)).until(condition)


def _login(driver, live, username: str) -> None:
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()
    driver.get(f"{live.url}/login/")
    driver.find_element(By.ID, "id_username").send_keys(username)
    driver.find_element(By.ID, "id_password").send_keys(live.password)
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".who"))


def _shot(driver, name: str, full: bool = True) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    if full:  # grow the window to the page's height for a whole-page screenshot
        height = min(driver.execute_script("return document.documentElement.scrollHeight"), 3000)
        driver.set_window_size(1366, max(height, 900))
    driver.save_screenshot(str(SHOTS / f"{name}.png"))
    driver.set_window_size(1366, 900)


def _text(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


# role -> what the matrix says they see on the home page and alice's page
SEES = {
    "support": {"keys": False, "compliance": False, "export": False, "erase": False, "forget": True},
    "admin": {"keys": True, "compliance": False, "export": True, "erase": True, "forget": True},
    "compliance": {"keys": False, "compliance": True, "export": True, "erase": False, "forget": False},
    "superuser": {"keys": True, "compliance": True, "export": True, "erase": True, "forget": True},
}


def test_login_page_and_each_role_sees_what_the_matrix_says(live, browser):
    from selenium.webdriver.common.by import By

    browser.delete_all_cookies()
    browser.get(f"{live.url}/")
    assert "/login/" in browser.current_url  # login required
    _shot(browser, "login", full=False)
    for username, sees in SEES.items():
        _login(browser, live, username)
        nav = browser.find_element(By.CSS_SELECTOR, ".topbar nav").text
        assert ("Keys & tokens" in nav) is sees["keys"], username
        assert ("Compliance" in nav) is sees["compliance"], username
        assert "alice@example.com" in _text(browser)
        if username == "support":
            _shot(browser, "home")
        browser.get(f"{live.url}/u/{live.alice}/")
        page = _text(browser)
        assert ("Export JSON" in page) is sees["export"], username
        assert ("Erase end-user" in page) is sees["erase"], username
        assert bool(browser.find_elements(By.CSS_SELECTOR, "details.forget")) is sees["forget"], username
        # The server refuses what the page does not offer (a hidden button is not a permission check).
        for path, permission in (("/t/acme-home/keys/", "keys"), ("/t/acme-home/audit/", "compliance")):
            browser.get(f"{live.url}{path}")
            assert ("Not allowed" in _text(browser)) is not sees[permission], (username, path)


def test_a_turn_sent_through_the_api_appears_live(live, browser):
    from selenium.webdriver.common.by import By

    _login(browser, live, "support")
    browser.get(f"{live.url}/u/{live.alice}/")
    _wait(browser, lambda d: d.find_elements(By.ID, "live-poller"))
    time.sleep(0.5)  # the page is open and polling
    marker = f"My smart plug clicks every {int(time.time()) % 1000} seconds, is that normal?"
    response = httpx.post(f"{live.url}/api/v1/subjects/alice@example.com/turns",
                          headers={"Authorization": f"Bearer {live.agent_token}"},
                          json={"text": marker, "session_id": "browser-test"}, timeout=30)
    assert response.status_code in (200, 201), response.text
    sent = time.monotonic()
    first = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#episodes > li"), timeout=3)
    _wait(browser, lambda d: marker in d.find_element(By.CSS_SELECTOR, "#episodes > li").text, timeout=3)
    assert time.monotonic() - sent < 3.0
    assert first is not None
    _shot(browser, "end-user")


def test_supersession_timeline_of_three_versions(live, browser):
    from selenium.webdriver.common.by import By

    _login(browser, live, "compliance")
    browser.get(f"{live.url}/u/{live.alice}/chain/demo-fact-v1/")
    versions = browser.find_elements(By.CSS_SELECTOR, ".timeline > li.version")
    assert len(versions) == 3
    assert "20 degrees" in versions[0].text and "19 degrees at night" in versions[2].text
    assert "harsh contradiction" in versions[2].text and "here" in versions[1].get_attribute("class")
    _shot(browser, "supersession-chain")
    browser.get(f"{live.url}/u/{live.alice}/chain/demo-playbook-v2/")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".timeline > li.version")) == 3
    assert len(browser.find_elements(By.CSS_SELECTOR, ".outcome-strip li")) == 7
    _shot(browser, "playbook-outcomes")


def test_a_plan_that_came_true_shows_as_fulfilled_in_the_chain(live, browser):
    from selenium.webdriver.common.by import By

    url = f"{live.url}/api/v1/subjects/alice@example.com/memories"
    headers = {"Authorization": f"Bearer {live.agent_token}"}
    plan = httpx.post(url, headers=headers, timeout=30,
                      json={"type": "semantic", "text": "Alice is going to take a pottery course in spring."})
    assert plan.status_code in (200, 201), plan.text
    done = httpx.post(url, headers=headers, timeout=30,
                      json={"type": "semantic", "text": "Alice took the pottery course.",
                            "supersedes": [plan.json()["memory"]["id"]], "contradiction": "fulfilled"})
    assert done.status_code in (200, 201), done.text
    _login(browser, live, "compliance")
    browser.get(f"{live.url}/u/{live.alice}/chain/{done.json()['memory']['id']}/")
    versions = browser.find_elements(By.CSS_SELECTOR, ".timeline > li.version")
    assert [("pottery course in spring" in v.text, "took the pottery course" in v.text) for v in versions] == [
        (True, False), (False, True)]
    tag = versions[1].find_element(By.CSS_SELECTOR, ".tag-fulfilled")
    assert tag.text == "plan fulfilled" and "contradiction" not in versions[0].text
    _shot(browser, "supersession-fulfilled")


def _ask_sandbox(browser, question: str, found: str) -> list:
    """Ask the recall sandbox ``question``; the elements matching ``found`` once the answer shows."""
    from selenium.webdriver.common.by import By

    from selenium.common.exceptions import StaleElementReferenceException

    # The previous answer may match ``found`` too: wait until it has been swapped out.
    before = browser.find_elements(By.CSS_SELECTOR, "#recall-results > *")

    def swapped(_driver) -> bool:
        try:
            before[0].is_enabled()
        except StaleElementReferenceException:
            return True
        return False

    box = browser.find_element(By.ID, "recall-q")
    box.clear()
    box.send_keys(question)
    browser.find_element(By.CSS_SELECTOR, "#recall-section button[type=submit]").click()
    if before:
        _wait(browser, swapped, timeout=15)
    return _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, found), timeout=15)


def test_recall_sandbox_shows_explain(live, browser):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    _login(browser, live, "support")
    browser.get(f"{live.url}/u/{live.alice}/")
    hits = _ask_sandbox(browser, "what temperature does Alice want at night?", "#recall-results .hit")
    assert len(hits) >= 2
    explain = hits[0].find_element(By.CSS_SELECTOR, "table.explain").text
    assert "×" in explain and "time_decay" in explain
    browser.execute_script("document.getElementById('recall-section').scrollIntoView()")
    _shot(browser, "recall-sandbox")
    # A turn that says two things is found by the sentence the question is about, and the card says which.
    matched = _ask_sandbox(browser, "why does the smoke alarm keep beeping?", "#recall-results .hit .matched")
    assert "the kitchen smoke alarm beeps every few minutes" in matched[0].text
    browser.execute_script("document.getElementById('recall-section').scrollIntoView()")
    _shot(browser, "recall-sandbox-sentence", full=False)
    # Alice's demo sessions hold questions ("Can you check ... for me?") and the turns after them:
    # a turn right after a matched question is credited, and its card links to the question.
    replies = _ask_sandbox(browser, "can you check the front door lock for me?", "#recall-results .hit .reply")
    assert "Answers the question before it in its session" in replies[0].text
    links = replies[0].find_elements(By.TAG_NAME, "a")
    if links:  # the question ranks in the list: the link jumps to its card
        assert browser.find_element(By.CSS_SELECTOR, links[0].get_attribute("hash")).tag_name == "li"
    browser.execute_script("arguments[0].scrollIntoView()", replies[0])
    _shot(browser, "recall-sandbox-reply", full=False)
    # A question that names a period: the episodes told in it carry the date boost (× time_window).
    # (The previous answer has no such factor, so waiting for one waits for the new answer.)
    _ask_sandbox(browser, "what did I say about the night temperature in the past month?", "#recall-results .hit")

    def boosted_hits(driver):
        try:
            return [h for h in driver.find_elements(By.CSS_SELECTOR, "#recall-results .hit") if "time_window" in h.text]
        except StaleElementReferenceException:  # the answer was being swapped in
            return []

    boosted = _wait(browser, boosted_hits, timeout=15)
    assert all("episodic" in h.text for h in boosted)
    # Above the hits, how the question was read: the words searched and the period it names.
    reading = browser.find_element(By.CSS_SELECTOR, "#recall-results dl.reading").text
    assert "Words searched" in reading and "“past month”: episodes from" in reading, reading
    assert "Asks for\nan event, by its grammar: episodic memories × 1.10 (intent)" in reading, reading
    browser.execute_script("arguments[0].scrollIntoView(); window.scrollBy(0, -40)",
                           browser.find_element(By.CSS_SELECTOR, "#recall-results dl.reading"))
    _shot(browser, "recall-sandbox-dates", full=False)
    # A question for members of a kind: the reading names the kind (language.concepts).
    kinds = _ask_sandbox(browser, "which appliances keep beeping?", "#recall-results dl.reading .kinds")
    assert "Kinds asked for" in kinds[0].text and "appliance" in kinds[0].text, kinds[0].text
    browser.execute_script("arguments[0].scrollIntoView(); window.scrollBy(0, -40)", kinds[0])
    _shot(browser, "recall-sandbox-kinds", full=False)
    # A question about how things stand: the reading says so, and facts carry the × intent factor.
    intent = _ask_sandbox(browser, "what temperature does Alice like at night now?",
                          "#recall-results dl.reading .intent")
    assert "how things stand" in intent[0].text and "semantic and catalog memories × 1.10" in intent[0].text
    # ... and the other names of its words a memory may hold instead, for half a word's share.
    synonyms = browser.find_element(By.CSS_SELECTOR, "#recall-results dl.reading .synonyms").text
    assert "Also matched as" in synonyms and "night: nighttime, dark" in synonyms, synonyms
    # ... and Alice, named in her own memory, is the "I" of her own turns.
    own = browser.find_element(By.CSS_SELECTOR, "#recall-results dl.reading .own-name").text
    assert "Names this end-user" in own and "alice" in own, own
    facts = [h for h in browser.find_elements(By.CSS_SELECTOR, "#recall-results .hit") if "semantic" in h.text]
    assert facts and all("intent" in h.find_element(By.CSS_SELECTOR, "table.explain").text for h in facts)
    browser.execute_script("arguments[0].scrollIntoView(); window.scrollBy(0, -40)", intent[0])
    _shot(browser, "recall-sandbox-intent", full=False)


def test_dana_asks_her_provider_now_and_as_of_a_day_before_the_switch(live, browser):
    """The demo's end-user (issue 69): BT, the provider she switched to, ranks first; the turn
    that named Virgin Media says which superseded fact ranked it down; as of a day before the
    switch, the Virgin Media fact is the one recalled."""
    from selenium.webdriver.common.by import By

    _login(browser, live, "support")
    browser.get(f"{live.url}/u/{live.dana}/")
    hits = _ask_sandbox(browser, "Which internet provider does Dana use now?", "#recall-results .hit")
    assert "BT" in hits[0].text and "Virgin Media to BT" in hits[0].text, hits[0].text
    stale = browser.find_elements(By.CSS_SELECTOR, "#recall-results .hit .stale")
    assert stale and "was superseded" in stale[0].text
    browser.execute_script("arguments[0].scrollIntoView(); window.scrollBy(0, -40)", stale[0])
    _shot(browser, "recall-sandbox-superseded", full=False)
    # The demo's clock: Dana's sessions are 40, 20 and 5 days before 1 November 2026.
    browser.execute_script("document.querySelector('#recall-section input[name=as_of]').value = '2026-10-15'; "
                           "document.getElementById('recall-results').innerHTML = ''")
    hits = _ask_sandbox(browser, "Which internet provider does Dana use now?", "#recall-results .hit")
    texts = [h.text for h in hits]
    assert not [t for t in texts if "to BT" in t] and any("Virgin Media" in t for t in texts), [t[:300] for t in texts if "to BT" in t]
    browser.execute_script("document.getElementById('recall-section').scrollIntoView()")
    _shot(browser, "recall-sandbox-as-of", full=False)


def test_forget_with_reason_removes_the_memory_and_is_audited(live, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _login(browser, live, "support")
    browser.get(f"{live.url}/u/{live.alice}/")
    memory = browser.find_element(By.ID, "m-demo-alice-3")  # "Alice's thermostat model is the Acme T3."
    memory.find_element(By.CSS_SELECTOR, "details.forget summary").click()
    Select(memory.find_element(By.CSS_SELECTOR, "select[name=reason]")).select_by_value("inaccurate")
    memory.find_element(By.CSS_SELECTOR, "input[name=note]").send_keys("Ticket 4711, model was wrong")
    memory.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait(browser, lambda d: not d.find_elements(By.ID, "m-demo-alice-3"))
    assert "forgotten" in browser.find_element(By.ID, "messages").text
    browser.refresh()
    assert not browser.find_elements(By.ID, "m-demo-alice-3")
    assert "Ticket 4711, model was wrong" in browser.find_element(By.ID, "forgets-section").text
    _login(browser, live, "compliance")
    browser.get(f"{live.url}/t/acme-home/audit/?action=memory.forget")
    audit = _text(browser)
    assert "demo-alice-3" in audit and "inaccurate" in audit and "support" in audit
    assert "Ticket 4711" not in audit  # the note is kept beside the audit log, not in it


def test_the_forget_dialog_lists_the_facts_derived_from_an_episode(live, browser):
    from selenium.webdriver.common.by import By

    dana = live.manage("shell", "-c", "from tenants.models import Subject; "
                                      "print(Subject.objects.get(external_id='dana@example.com').user_id)")
    _login(browser, live, "support")
    browser.get(f"{live.url}/u/{dana.strip().splitlines()[-1]}/")
    fact = browser.find_element(By.CSS_SELECTOR, "#facts-section li.memory")
    text = fact.find_element(By.CSS_SELECTOR, ".text").text
    episode_id = fact.find_element(By.CSS_SELECTOR, "a[href^='#m-']").get_attribute("href").split("#m-")[1]
    episode = browser.find_element(By.ID, f"m-{episode_id}")
    browser.execute_script("arguments[0].scrollIntoView()", episode)
    episode.find_element(By.CSS_SELECTOR, "details.forget summary").click()
    # Listed when the dialog opens, before anything is confirmed.
    _wait(browser, lambda d: text in episode.find_element(By.CSS_SELECTOR, ".forget-derived").text)
    assert episode.find_element(By.CSS_SELECTOR, "input[name=keep_derived]")
    assert browser.find_elements(By.ID, f"m-{episode_id}")  # nothing forgotten


def test_audit_export_downloads_and_verifies(live, browser):
    from selenium.webdriver.common.by import By

    _login(browser, live, "compliance")
    browser.get(f"{live.url}/t/acme-home/audit/")
    _shot(browser, "audit-log", full=False)
    browser.get(f"{live.url}/t/acme-home/audit/?access=staff")
    assert "staff.viewed" in _text(browser)
    _shot(browser, "staff-access-log", full=False)
    browser.find_element(By.LINK_TEXT, "Verify chain").click()
    browser.find_element(By.XPATH, "//button[normalize-space()='Checkpoint now']").click()
    _wait(browser, lambda d: "Checkpoint written at event" in _text(d), timeout=30)
    assert "Chain intact" in browser.find_element(By.ID, "verify-result").text
    latest = browser.find_element(By.ID, "latest-checkpoint").text
    assert "Pins" in latest and "create documents" in latest
    _shot(browser, "audit-verify", full=False)
    browser.get(f"{live.url}/t/acme-home/audit/")
    browser.find_element(By.PARTIAL_LINK_TEXT, "Export JSON Lines").click()
    path = _wait(browser, lambda d: next((p for p in browser.downloads.glob("*.jsonl")), None), timeout=15)
    time.sleep(0.3)
    lines = path.read_text().splitlines()
    header, kinds = json.loads(lines[0]), [json.loads(line).get("type") for line in lines]
    assert header["filtered"] is False and kinds.count("event") > 20 and "checkpoint" in kinds and kinds[-1] == "end"
    public = audit_chain.SigningKeys.from_entries([live.env["ENGRAM_AUDIT_SIGNING_KEYS"]]).public()
    assert audit_chain.verify_export(lines, public=public).ok
    keys = path.parent / "engram-audit-public-keys.json"
    keys.write_text(json.dumps(public.as_json()))
    # The auditor holds the public key alone: no secret in the environment.
    offline = subprocess.run([sys.executable, "-m", "tenants.audit_chain", "--public-key", str(keys), str(path)],
                             cwd=ROOT, capture_output=True, text=True, check=False, env={})
    assert offline.returncode == 0 and "signature OK" in offline.stdout, offline.stdout + offline.stderr


def test_keys_and_tokens_page(live, browser):
    from selenium.webdriver.common.by import By

    _login(browser, live, "admin")
    browser.get(f"{live.url}/t/acme-home/keys/")
    browser.find_element(By.ID, "token-name").send_keys("browser-test bot")
    browser.find_element(By.CSS_SELECTOR, "form.inline-form button[type=submit]").click()
    # The click posts the form; the page that shows the secret may not have loaded yet.
    secret = _wait(browser, lambda d: d.find_elements(By.ID, "new-token"), timeout=30)[0].get_attribute("value")
    assert secret.startswith("eng_")
    _shot(browser, "keys-and-tokens")
    live.browser_token = secret
    browser.get(f"{live.url}/t/acme-home/keys/")
    assert not browser.find_elements(By.ID, "new-token")  # shown once
    assert "browser-test bot" in _text(browser)


def test_token_access_tab(live, browser):
    """What each agent token read, who minted it: the browser-minted token (by a staff user) and
    the demo's (by the seed job) each recall Alice's memory, then compliance looks."""
    import httpx
    from selenium.webdriver.common.by import By

    for token in (getattr(live, "browser_token", None) or live.agent_token, live.agent_token):
        answer = httpx.post(f"{live.url}/api/v1/subjects/alice@example.com/recall", json={"query": "thermostat"},
                            headers={"Authorization": f"Bearer {token}"}, timeout=60)
        assert answer.status_code == 200 and answer.json()["memories"]
    _login(browser, live, "compliance")
    browser.get(f"{live.url}/t/acme-home/audit/")
    browser.find_element(By.LINK_TEXT, "Token access").click()
    summary = _wait(browser, lambda d: d.find_elements(By.ID, "token-summary"))[0].text
    assert "recall: 1" in summary and "alice@example.com" in browser.find_element(By.ID, "token-reads").text
    _shot(browser, "token-access", full=False)
    browser.get(f"{live.url}/t/acme-home/audit/?access=staff")
    if getattr(live, "browser_token", None):
        assert "through token" in _text(browser)


def test_usage_page_shows_the_tenants_use_per_day(live, browser):
    from selenium.webdriver.common.by import By

    headers = {"Authorization": f"Bearer {live.agent_token}"}
    with httpx.Client(base_url=f"{live.url}/api/v1/", headers=headers, timeout=30) as api:
        assert api.post("subjects/alice%40example.com/turns", json={"text": "The thermostat shows E4."}).status_code == 201
        for _ in range(3):
            assert api.post("subjects/alice%40example.com/recall", json={"query": "thermostat"}).status_code == 200
        deadline = time.monotonic() + 30
        while True:  # each process writes its counts every ENGRAM_USAGE_FLUSH_SECONDS (0.5 s here)
            usage = api.get("usage", params={"days": 7})
            assert usage.status_code == 200
            [today, *earlier] = usage.json()["days"]
            if today["requests"] >= 4 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert len(earlier) == 6 and today["requests"] >= 4 and today["memories_stored"] >= 1

    _login(browser, live, "support")
    browser.get(f"{live.url}/t/acme-home/usage/")
    assert browser.title.startswith("Not allowed")  # tenant admins only
    _login(browser, live, "admin")
    browser.get(f"{live.url}/")
    browser.find_element(By.LINK_TEXT, "Usage").click()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "table.usage"))
    browser.find_element(By.LINK_TEXT, "Last 7 days").click()
    _wait(browser, lambda d: "Last 7 days, newest first" in _text(d))
    rows = browser.find_elements(By.CSS_SELECTOR, "table.usage tbody tr")
    assert len(rows) == 7
    cells = [c.text for c in rows[0].find_elements(By.TAG_NAME, "td")]
    assert cells[0] == today["date"] and int(cells[1]) >= today["requests"]
    assert int(cells[2]) >= today["memories_stored"]
    _shot(browser, "usage")
