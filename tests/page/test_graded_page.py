"""The page in a graded session, in headless Chromium (docs/page.md#a-graded-session): a
signed-in student's page boots into the exercise view with no failed request (no 4xx or
5xx, nothing refused) and no console error, and asks for nothing the session turns off —
no op list, example, lesson or mystery; a link opens the exercise with the student's own
numbers, and a submission is graded. Without a link, the exercise view lists the
session's exercises. An instructor's page is the whole playground. Screenshots
(test-artifacts/graded-*.png)."""

from __future__ import annotations

import pytest
from browser_session import ARTIFACTS, axe_serious
from record_course import SALT, answers, environment, keyring
from sandbox_server import running_sandbox

from glassllm.course import build_case
from glassllm.course.exercise import load_dir

pytestmark = [pytest.mark.browser, pytest.mark.slow]
LINK = "/#exercise=ce-record"
OFF = ("/api/v1/ops", "/api/v1/examples", "/api/v1/lessons", "/api/v1/mysteries",
       "/api/v1/eval", "/api/v1/check", "/docs/contract", "/dist/", "/simple/")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("graded-page")
    with running_sandbox(env=environment(root, GLASSLLM_GRADED_SESSION="1")) as url:
        yield url, root


class Watched:
    """A page of its own browser context, signed in with `token` (the page's cookie, as
    its sign-in makes it), and everything it asked and was told."""

    def __init__(self, browser, url: str, token: str | None) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 800})
        if token is not None:
            signed = self.context.request.post(url + "/api/v1/session", data={"token": token})
            assert signed.status == 200, signed.text()
        self.page = self.context.new_page()
        self.asked: list[str] = []
        self.failed: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda r: self.asked.append(r.url.removeprefix(url)))
        self.page.on("response", lambda r: self.failed.append(f"{r.status} {r.url}")
                     if r.status >= 400 else None)
        self.page.on("requestfailed", lambda r: self.failed.append(f"failed {r.url}"))
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.on("console", lambda m: self.errors.append(m.text)
                     if m.type == "error" else None)

    def open(self, url: str) -> None:
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready]")

    def asked_off(self) -> list[str]:
        return [a for a in self.asked if a.split("?")[0].startswith(OFF)]

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"graded-{name}.png"), full_page=True)


def test_a_signed_in_student_boots_into_the_exercise_with_no_failed_request(browser, graded):
    url, root = graded
    w = Watched(browser, url, keyring().issue("ada", days=1))
    w.open(url + LINK)
    w.page.wait_for_selector("#exercise-form")
    case = build_case(load_dir(root / "exercises")[0], "ada", SALT)
    assert f"{case.variables['logits'][0][0]:.6g}"[:5] in w.page.inner_text("#exercise-body")
    assert w.page.inner_text("#access-who") == "Signed in as ada"
    assert w.page.is_hidden(".layout") and w.page.is_hidden(".train")
    assert w.page.is_hidden("#lessons") and w.page.is_hidden("#run")
    assert w.page.inner_text("#exercise-back") == "← All exercises of this session"
    given = answers(root, "ada")["logits"]
    w.page.fill("#answer-0", repr(given))
    w.page.click("#exercise-submit")
    w.page.wait_for_selector("#exercise-verdict")
    assert w.page.inner_text("#exercise-verdict").startswith("✓ Right")
    w.shot("student-exercise")
    assert axe_serious(w.page, "#exercise-view") == []
    w.page.click("#exercise-back")                         # the session's list, not the
    w.page.wait_for_selector("#exercise-index a[data-exercise=ce-record]")   # playground
    assert w.page.is_hidden(".layout") and w.page.is_hidden("#exercise-back")
    w.shot("student-index")
    assert w.failed == [] and w.errors == [] and w.asked_off() == []
    assert any(a.startswith("/api/v1/exercises/ce-record/submit") for a in w.asked)
    w.context.close()


def test_the_page_without_a_link_lists_the_sessions_exercises(browser, graded):
    url, _ = graded
    w = Watched(browser, url, keyring().issue("bob", days=1))
    w.open(url + "/")
    links = w.page.eval_on_selector_all("#exercise-index a", "as => as.map(a => a.dataset"
                                        ".exercise)")
    assert links == ["ce-record"]                           # no lesson
    assert w.page.inner_text("#exercise-title") == "Exercises of this graded session"
    assert w.failed == [] and w.errors == [] and w.asked_off() == []
    w.context.close()


def test_an_instructors_page_is_the_whole_playground(browser, graded):
    url, _ = graded
    w = Watched(browser, url, keyring().issue("prof", "instructor", days=1))
    w.open(url + "/")
    assert w.page.is_visible(".layout") and w.page.is_visible("#run")
    assert "/api/v1/ops" in w.asked and "/api/v1/lessons" in w.asked
    assert w.failed == [] and w.errors == []
    w.context.close()
