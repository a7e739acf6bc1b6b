"""What BabyAI and ALFWorld show along task 0's episode, as literals: the env tests and the AgentGym-client tests
expect them word for word."""

# BabyAI task 0 after /reset, after "turn left", and after "go to red ball 1" (won)
TASK0_ACTIONS = (
    '["turn left", "turn right", "move forward", "go to grey key 1", "pickup grey key 1", '
    '"go to grey ball 1", "pickup grey ball 1", "go to grey key 2", "pickup grey key 2", '
    '"go to grey key 3", "pickup grey key 3", "go to grey box 1", "pickup grey box 1", '
    '"go to grey key 4", "pickup grey key 4", "go to grey ball 2", "pickup grey ball 2", '
    '"go to red ball 1", "pickup red ball 1", "check available actions"]'
)
TASK0_OBS = "\n".join(
    [
        "Your goal: go to the red ball",
        "There is a grey key 1 1 steps in front of you and 1 steps to your left.",
        "There is a grey ball 1 1 steps in front of you and 1 steps to your right.",
        "There is a grey key 2 2 steps in front of you and 1 steps to your left.",
        "There is a grey key 3 2 steps in front of you and 1 steps to your right.",
        "There is a grey box 1 2 steps in front of you and 2 steps to your right.",
        "There is a grey key 4 4 steps in front of you and 2 steps to your right.",
        "There is a grey ball 2 5 steps in front of you and 1 steps to your right.",
        "There is a red ball 1 4 steps in front of you and 3 steps to your right.",
        "You are not carrying anything.",
        "Available actions: " + TASK0_ACTIONS,
    ]
)

TASK0_TURNED = "\n".join(
    [
        "You turned left.",
        "Your goal: go to the red ball",
        "There is a grey key 1 1 steps in front of you and 1 steps to your right.",
        "There is a grey key 2 1 steps in front of you and 2 steps to your right.",
        "There is a wall directly to your left.",
        "You are not carrying anything.",
        'Available actions: ["turn left", "turn right", "move forward", "go to grey key 1", "pickup grey key 1", '
        '"go to grey key 2", "pickup grey key 2", "check available actions"]',
    ]
)
TASK0_WON = "\n".join(
    [
        "You went to red ball 1. You completed the mission. The episode is over.",
        "Your goal: go to the red ball",
        "There is a red ball 1 1 steps in front of you.",
        "There is a grey key 1 1 steps in front of you and 1 steps to your left.",
        "There is a grey ball 1 2 steps in front of you and 2 steps to your left.",
        "You are not carrying anything.",
        'Available actions: ["turn left", "turn right", "go to red ball 1", "pickup red ball 1", "go to grey key 1", '
        '"pickup grey key 1", "go to grey ball 1", "pickup grey ball 1", "check available actions"]',
    ]
)

# ALFWorld task 0's room and the actions it offers at the start, at sidetable 2, holding laptop 2, at the tvstand
ROOM1 = (
    "You are in the middle of a room. Looking quickly around you, you see a armchair 1, a coffeetable 1, "
    "a drawer 1, a garbagecan 1, a shelf 4, a shelf 3, a shelf 2, a shelf 1, a sidetable 2, a sidetable 1, "
    "a sofa 1, and a tvstand 1.\n\nYour task is to: look at laptop under the floorlamp."
)
GO_TO = [
    "go to armchair 1",
    "go to coffeetable 1",
    "go to drawer 1",
    "go to garbagecan 1",
    "go to shelf 1",
    "go to shelf 2",
    "go to shelf 3",
    "go to shelf 4",
    "go to sidetable 1",
    "go to sidetable 2",
    "go to sofa 1",
    "go to tvstand 1",
]
START1 = GO_TO + ["help", "inventory", "look"]
AT_SIDETABLE2 = (
    ["examine sidetable 2"]
    + [a for a in GO_TO if a != "go to sidetable 2"]
    + [
        "help",
        "inventory",
        "look",
        "take box 1 from sidetable 2",
        "take cellphone 2 from sidetable 2",
        "take laptop 2 from sidetable 2",
    ]
)
HOLDING = (
    ["examine laptop 2", "examine sidetable 2"]
    + [a for a in GO_TO if a != "go to sidetable 2"]
    + ["help", "inventory", "look", "move laptop 2 to sidetable 2"]
)
AT_TVSTAND = (
    ["examine laptop 2", "examine tvstand 1"]
    + [a for a in GO_TO if a != "go to tvstand 1"]
    + ["help", "inventory", "look", "use floorlamp 1"]
)
