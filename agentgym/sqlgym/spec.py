"""SQL questions over databases (AgentGym's SqlGym protocol): the spec; no server in this project yet."""

from agentgym.spec import EnvSpec
from agentgym.tools import EnvTool, text

SPEC = EnvSpec(
    name="sqlgym",
    family="A",
    reset_field="item_id",
    accepts_answer=True,
    action_pattern=r"(?s)\s*(select|with)\b.+",
    instructions=(
        "Answer the question about a database with one SQL query. The observation gives the question "
        "and the tables. Your action is a single SQL statement (SQLite dialect), written on one line. "
        "The reward is 1 when the result of your query equals the expected answer."
    ),
    tools=(
        EnvTool(
            "query",
            "Run your SQL query; its result is your answer.",
            "{sql}",
            {"sql": text("one SQL statement (SQLite dialect) on one line")},
        ),
    ),
)
