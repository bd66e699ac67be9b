from collections.abc import Callable

class KazooRetry:
    def __init__(
        self,
        max_tries: int | None = 1,
        delay: float = 0.1,
        backoff: float = 2,
        max_jitter: float = 0.4,
        max_delay: float = 60.0,
        ignore_expire: bool = True,
        sleep_func: Callable[[float], None] = ...,
        deadline: float | None = None,
        interrupt: Callable[[], bool] | None = None,
    ) -> None: ...
