"""What a route takes besides its request, as typed FastAPI dependencies: the settings and
the shared services `glassllm_service.app.create_app` built once (FastAPI's
``Annotated[..., Depends]``, as the full-stack template does).

    async def readyz(admission: AdmissionDep) -> Response: ...

The op POST, the busiest path, reads ``request.app.state`` itself instead: it is a bare
route without FastAPI's dependency solving (`glassllm_service.routes.ops`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Query, Request

from glassllm_service.admission import Admission
from glassllm_service.course_state import CourseState
from glassllm_service.settings import Settings
from glassllm_service.training_queue import TrainingQueue


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _admission(request: Request) -> Admission:
    return request.app.state.admission


def _course(request: Request) -> CourseState:
    return request.app.state.course


def _training_queue(request: Request) -> TrainingQueue:
    return request.app.state.training_queue


SettingsDep = Annotated[Settings, Depends(_settings)]
"""The sandbox's `Settings` (every GLASSLLM_* setting), read once at startup."""
AdmissionDep = Annotated[Admission, Depends(_admission)]
"""This worker's compute slots and their queue (`glassllm_service.admission`)."""
TrainingQueueDep = Annotated[TrainingQueue, Depends(_training_queue)]
"""This worker's training runs and their waiting line (GLASSLLM_MAX_TRAINING_RUNS,
GLASSLLM_MAX_TRAINING_QUEUE)."""
CourseDep = Annotated[CourseState, Depends(_course)]
"""The course side: mode, exercises, what the open ones hide (`glassllm_service.course_state`)."""

# who is asking, on the exercise and mystery routes (course_state.CourseState.student)
StudentQuery = Annotated[str | None, Query(
    description="the student id (or the X-Student-ID header); practice mode's default:"
                " practice; course mode needs one")]
StudentHeader = Annotated[str | None, Header(alias="X-Student-ID", description=(
    "the student id (or ?student=)"))]
