"""`python -m reference_server [--config FILE | --preset NAME] [--port N] ...`"""

from reference_server.launch import main

raise SystemExit(main())
