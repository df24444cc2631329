from trainium_lens.cli import main

raise SystemExit(main())
