"""SciWorld: ScienceWorld's tasks and splits (`data`), one simulator JVM per env (`env`), the gold-path oracle
(`plan`) and HTTP routes (`app`)."""
