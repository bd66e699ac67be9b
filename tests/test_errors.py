from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import ErrorCode


@given(st.integers(-(2**15), 2**15 - 1))
def test_a_peers_code_is_ours_or_unknown_server_error(value: int) -> None:
    code = ErrorCode.of(value)
    known = {c.value for c in ErrorCode}
    assert code == (value if value in known else ErrorCode.UNKNOWN_SERVER_ERROR)


def test_known_codes_keep_their_names() -> None:
    assert ErrorCode.of(51) is ErrorCode.CONCURRENT_TRANSACTIONS
    assert ErrorCode.of(0) is ErrorCode.NONE
    assert ErrorCode.of(9999) is ErrorCode.UNKNOWN_SERVER_ERROR
