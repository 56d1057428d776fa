from engine.cli.main import main

raise SystemExit(main())
